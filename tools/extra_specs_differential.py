#!/usr/bin/env python3
"""Differential check of extra-spec validation: the Nova 34.0.0 oracle against OpenKeel.

Sends generated (key, value) pairs, one per request, as
``POST /v2.1/flavors/{id}/os-extra_specs`` at microversion 2.86 to both sides and counts the
responses whose status, and whose error message, are identical. It then replays a sample of the
pairs Nova refused at 2.86 at microversion 2.85, where nothing is validated (each must be 200).

    /work/shared/nova-oracle/run-oracle.sh start 18775
    .venv/bin/python tools/extra_specs_differential.py --in-process
    .venv/bin/python tools/extra_specs_differential.py --openkeel http://127.0.0.1:8774

``--in-process`` stands in for OpenKeel's HTTP API: it calls ``openkeel_compute.extra_specs.validate``
and maps InvalidExtraSpec to 400 (with its message) and success to 200, after str()-ing numbers as
the flavor API does. Not part of the test suite: it needs a running oracle. Exit status 0 only when
everything is identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import random
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterator

from openkeel_compute.extra_specs import VALIDATORS, InvalidExtraSpec, Validator, validate

ADMIN_TOKEN = "admin:admin"
# The flavor API's key schema; pairs outside it would test the JSON schema, not the validators.
SCHEMA_KEY = re.compile(r"^[a-zA-Z0-9-_:. ]{1,255}$")
# A fresh flavor every so often keeps Nova's per-request extra-spec load small.
CASES_PER_FLAVOR = 400

Value = str | int | float


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: int
    message: str | None  # the error message; None for a success


# ---------------------------------------------------------------- generation


PARAMETER_SAMPLES = {
    "group": ["", "1", "_abc", "X-y_9", "a" * 64],
    "num": ["0", "1", "12", "007"],
    "filter": ["", ":a", ":a:b_1", ":x:y:z"],
    "key": ["foo", "a.b", "x y", "k:v", "<in>", "9"],
    "resource": ["X", "MY_GPU", "123", "A_1"],
    "trait": ["X", "MY_FEATURE", "123", "A_1"],
}

PATTERN_SAMPLES = [
    "0", "1", "0-3", "0-3,^2", "^1", "1,2,3", "1-2,4-5", "0-", "-1", "a", "1,,2", "^", "1-2-3",
    "large", "small", "any", "huge", "2MB", "1GiB", "4kb", "2048", "1Gbit", "1TiB", "1Kib", "LARGE",
    "a,b", "a,,b", "LABEL_1,", ",a", "a b",
    "a:1", "a:1, b:2", "a:1 ,b:2", "a", "a:x", ":1", "a:1,", "gpu:2,nic:1",
]

INT_SAMPLES = [
    "0", "1", "5", "15", "16", "-1", "-0", "+5", " 5 ", "1_000", "\u0663", "99999999999999999999",
    "", "x", "1.5", "0x10", "1e3", " ", "--1", "1__0", "_1", "5\n", "\t7",
]

BOOL_SAMPLES = [
    "true", "True", "TRUE", " yes ", "on", "1", "0", "f", "N", "off", "no", "t", "Y\n",
    "tru", "2", "", "yess", "none", "enabled", "ye s",
]

FREE_SAMPLES = ["", "x", ">= 4", "s== x86_64", "<in> avx", "<or> a <or> b", "caf\u00e9", "'quoted'",
                "back\\slash", "{brace}", "a" * 255]

NUMBER_SAMPLES: list[Value] = [0, 1, -1, 16, 10**20, 1.5, 2.0, 1e20, -0.0]

EXTRA_KEYS = [
    # policed namespaces, unknown keys
    "hw:bogus", "hw:", "hw:cpu_policy ", "hw:CPU_POLICY", "hw_rng:foo", "hw_video:ram", "os:secure",
    "quota:cpu", "accel:", "accel:device", "vmware:x", "pci_passthrough:aliases", "capabilities:foo",
    "capabilities:cpu_info.x", "capabilities:stats:a.b", "trait:FOO", "trait1:lowercase",
    "trait-1:FOO", "trait:CUSTOM_", "trait:CUSTOM_abc", "resources:FOO", "resources_1:CUSTOM_",
    "resources" + "a" * 65 + ":VCPU", "trait" + "b" * 64 + ":CUSTOM_X", "aggregate_instance_extra_specs:",
    # the '.' in Nova's NUMA name regexes is unescaped, so any character fits there
    "hw:numa_cpus_1", "hw:numa_mem:0", "hw:numa_cpus.", "hw:numa_mem.x",
    # namespaces nobody polices
    "openkeel:foo", "HW:cpu_policy", "hw_foo:x", "hw :x", "resources.1:VCPU", ":x", "x:", "powervm:x",
    "Trait:FOO", "aggregate_instance_extra_specs", "capabilities",
    # bare keys
    "hide_hypervisor_id", "group_policy", "foo", "cpu_policy", "hw", "trait",
    # the schema's '$' allows one trailing newline
    "hw:cpu_policy\n", "foo\n",
]


def concrete_key(validator: Validator, rng: random.Random) -> str:
    key = validator.name
    for parameter in validator.parameters:
        key = key.replace(f"{{{parameter.name}}}", rng.choice(PARAMETER_SAMPLES[parameter.name]))
    return key


def mutated_key(key: str, rng: random.Random) -> str:
    mutations: list[Callable[[str], str]] = [
        lambda k: k + "X",
        lambda k: k[:-1],
        lambda k: k.swapcase(),
        lambda k: k.replace(":", "::", 1),
        lambda k: k.replace(":", " :", 1),
        lambda k: k.replace(":", "1:", 1),
        lambda k: k.replace(":", "-a_b:", 1),
        lambda k: k.replace("_", "-"),
        lambda k: k + ":x",
    ]
    return rng.choice(mutations)(key)


def value_samples(validator: Validator, rng: random.Random) -> list[Value]:
    """A few valid and a few invalid candidates for this validator's value."""
    if validator.value_type == "int":
        candidates: list[Value] = [*INT_SAMPLES]
        low = validator.minimum if validator.minimum is not None else -5
        high = validator.maximum if validator.maximum is not None else 10**6
        candidates += [str(low), str(low - 1), str(high), str(high + 1), str(rng.randint(low, high))]
    elif validator.value_type == "bool":
        candidates = [*BOOL_SAMPLES]
    elif validator.pattern is not None:
        candidates = [*PATTERN_SAMPLES]
    elif validator.enum is not None:
        enum = list(validator.enum)
        candidates = enum + [e.upper() for e in enum] + [f" {e}" for e in enum] + [e[:-1] for e in enum]
        candidates += ["", "bogus"]
    else:
        candidates = [*FREE_SAMPLES]
    picked = rng.sample(candidates, k=min(5, len(candidates)))
    if rng.random() < 0.15:
        picked.append(rng.choice(NUMBER_SAMPLES))
    return picked


def generate_cases(seed: int) -> Iterator[tuple[str, Value]]:
    """Deterministic pairs: every validator with sampled values, mutated keys, and hand-picked keys."""
    rng = random.Random(seed)
    for validator in VALIDATORS.values():
        key = concrete_key(validator, rng)
        for value in value_samples(validator, rng):
            yield key, value
        yield mutated_key(key, rng), rng.choice(value_samples(validator, rng))
    for key in EXTRA_KEYS:
        for value in ("required", "1", "x", "true", "isolate"):
            yield key, value


def schema_valid(key: str, value: Value) -> bool:
    if not SCHEMA_KEY.search(key):
        return False
    return len(str(value)) <= 255


# ---------------------------------------------------------------- transport


class NovaLikeApi:
    """Just the flavor and extra-spec calls, over one keep-alive connection."""

    def __init__(self, base_url: str) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self.prefix = parsed.path.rstrip("/")
        self.connection = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port or 80,
                                                     timeout=30)

    def call(self, method: str, path: str, body: object, microversion: str) -> tuple[int, object]:
        headers = {"X-Auth-Token": ADMIN_TOKEN, "OpenStack-API-Version": f"compute {microversion}",
                   "Content-Type": "application/json", "Accept": "application/json"}
        payload = None if body is None else json.dumps(body).encode()
        self.connection.request(method, self.prefix + path, body=payload, headers=headers)
        response = self.connection.getresponse()
        raw = response.read()
        try:
            parsed: object = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return response.status, parsed

    def create_flavor(self, name: str) -> str:
        status, body = self.call("POST", "/v2.1/flavors",
                                 {"flavor": {"name": name, "ram": 512, "vcpus": 1, "disk": 1}}, "2.86")
        if status != 200 or not isinstance(body, dict):
            raise SystemExit(f"cannot create flavor {name}: {status} {body}")
        return str(body["flavor"]["id"])

    def delete_flavor(self, flavor_id: str) -> None:
        self.call("DELETE", f"/v2.1/flavors/{flavor_id}", None, "2.86")

    def set_extra_spec(self, flavor_id: str, key: str, value: Value, microversion: str) -> Outcome:
        status, body = self.call("POST", f"/v2.1/flavors/{flavor_id}/os-extra_specs",
                                 {"extra_specs": {key: value}}, microversion)
        if status == 200:
            return Outcome(200, None)
        message = body
        if isinstance(body, dict) and body:
            fault = next(iter(body.values()))
            if isinstance(fault, dict):
                message = fault.get("message")
        return Outcome(status, str(message))


class RemoteSide:
    """One server under test; rotates flavors so none collects thousands of specs."""

    def __init__(self, base_url: str, label: str) -> None:
        self.api = NovaLikeApi(base_url)
        self.label = label
        self.flavors: list[str] = []
        self.calls = 0

    def __call__(self, key: str, value: Value, microversion: str) -> Outcome:
        if self.calls % CASES_PER_FLAVOR == 0:
            self.flavors.append(self.api.create_flavor(f"es-diff-{self.label}-{len(self.flavors)}"))
        self.calls += 1
        return self.api.set_extra_spec(self.flavors[-1], key, value, microversion)

    def close(self) -> None:
        for flavor_id in self.flavors:
            self.api.delete_flavor(flavor_id)


def in_process(key: str, value: Value, microversion: str) -> Outcome:
    """What OpenKeel's flavor API must do with one extra spec, without HTTP.

    Numbers arrive as Nova's stdlib JSON parser makes them: integers of any size stay integers, so
    10**20 is validated as '100000000000000000000' (a parser that turns it into 1e+20 differs).
    """
    text = value if isinstance(value, str) else str(value)
    major, minor = (int(part) for part in microversion.split("."))
    if (major, minor) < (2, 86):
        return Outcome(200, None)
    try:
        validate(key, text)
    except InvalidExtraSpec as refusal:
        return Outcome(400, refusal.message)
    return Outcome(200, None)


# ---------------------------------------------------------------- comparison


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", default="http://127.0.0.1:18775", help="Nova oracle base URL")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--openkeel", metavar="URL", help="OpenKeel API base URL")
    target.add_argument("--in-process", action="store_true", help="call extra_specs.validate directly")
    parser.add_argument("--seed", type=int, default=86)
    parser.add_argument("--show", type=int, default=40, help="mismatches to print")
    parser.add_argument("--replay-at-2.85", dest="replay", type=int, default=500,
                        help="how many of the pairs refused at 2.86 to replay at 2.85 (the oracle is slow)")
    args = parser.parse_args(argv)

    cases = [case for case in generate_cases(args.seed) if schema_valid(*case)]
    oracle = RemoteSide(args.oracle, "oracle")
    openkeel: Callable[[str, Value, str], Outcome]
    remote_openkeel = RemoteSide(args.openkeel, "openkeel") if args.openkeel else None
    openkeel = remote_openkeel if remote_openkeel is not None else in_process
    mode = f"openkeel {args.openkeel}" if args.openkeel else "in-process"

    try:
        same_status = same_message = 0
        refused: list[tuple[str, Value]] = []
        mismatches: list[str] = []
        for key, value in cases:
            expected = oracle(key, value, "2.86")
            actual = openkeel(key, value, "2.86")
            same_status += expected.status == actual.status
            same_message += expected == actual
            if expected.status == 400:
                refused.append((key, value))
            if expected != actual:
                mismatches.append(f"  {key!r}={value!r}: nova {expected.status} {expected.message!r}"
                                  f" / openkeel {actual.status} {actual.message!r}")
        total = len(cases)
        print(f"microversion 2.86 ({mode}): {total} pairs, {len(refused)} refused by Nova; "
              f"status identical {same_status}/{total} ({100 * same_status / total:.2f} %), "
              f"status+message identical {same_message}/{total} ({100 * same_message / total:.2f} %)")
        for line in mismatches[: args.show]:
            print(line)

        replayed = random.Random(args.seed).sample(refused, k=min(args.replay, len(refused)))
        unvalidated_nova = unvalidated_openkeel = 0
        for key, value in replayed:
            unvalidated_nova += oracle(key, value, "2.85").status == 200
            unvalidated_openkeel += openkeel(key, value, "2.85").status == 200
        print(f"microversion 2.85: of {len(replayed)} pairs refused at 2.86, Nova accepted "
              f"{unvalidated_nova}, OpenKeel accepted {unvalidated_openkeel}")
    finally:
        oracle.close()
        if remote_openkeel is not None:
            remote_openkeel.close()

    everything_same = (same_message == total and unvalidated_nova == len(replayed)
                       and unvalidated_openkeel == len(replayed))
    return 0 if everything_same else 1


if __name__ == "__main__":
    sys.exit(main())
