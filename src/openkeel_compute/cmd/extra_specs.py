"""``openkeel-compute extra-specs ...``: list Nova's extra-spec validators and explain one key.

    openkeel-compute extra-specs list [--namespace hw]
    openkeel-compute extra-specs describe KEY [--value VALUE]

``describe`` also says what KubeVirt does with the key when the KubeVirt mapping
(``openkeel_compute.kubevirt.rules.rule_for_extra_spec``) is installed; without it, nothing is said.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from openkeel_compute.extra_specs import (
    VALIDATORS,
    InvalidExtraSpec,
    Validator,
    find_validator,
    is_policed_namespace,
    validate,
)
from openkeel_compute.extra_specs.model import FALSE_WORDS, TRUE_WORDS

# What --namespace takes for the two keys that have none.
BARE_NAMESPACE = "none"
KUBEVIRT_RULES_MODULE = "openkeel_compute.kubevirt.rules"


def register(subparsers: Any) -> None:
    """Add the ``extra-specs`` command group to the openkeel-compute parser."""
    parser = subparsers.add_parser("extra-specs", help="Nova's flavor extra specs: list, describe",
                                   description="Nova 34.0.0's flavor extra-spec validators (microversion >= 2.86).")
    group = parser.add_subparsers(dest="extra_specs_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    listing = group.add_parser("list", help="list the validators (name, value type, allowed values)")
    listing.add_argument("--namespace", choices=namespace_choices(), metavar="NAMESPACE",
                         help=f"only this namespace ({', '.join(namespace_choices())})")
    listing.set_defaults(func=run_list)

    describe = group.add_parser("describe", help="explain one key: meaning, allowed values, deprecation")
    describe.add_argument("key", help="a concrete key (hw:numa_cpus.0) or a validator name (hw:numa_cpus.{num})")
    describe.add_argument("--value", help="also say whether Nova would accept this value, and why not")
    describe.set_defaults(func=run_describe)


def namespace_choices() -> list[str]:
    """The namespace labels --namespace accepts, in registry order."""
    labels = dict.fromkeys(v.namespace or BARE_NAMESPACE for v in VALIDATORS.values())
    return list(labels)


def allowed_values(validator: Validator) -> str:
    """The value rule of a validator, in words."""
    if validator.value_type == "bool":
        return f"boolean: {', '.join(sorted(TRUE_WORDS))} / {', '.join(sorted(FALSE_WORDS))} (any case)"
    if validator.value_type == "int":
        bounds = [f">= {validator.minimum}"] if validator.minimum is not None else []
        bounds += [f"<= {validator.maximum}"] if validator.maximum is not None else []
        return "integer" + (f" {' and '.join(bounds)}" if bounds else "")
    if validator.pattern is not None:
        return f"string matching {validator.pattern}"
    if validator.enum is not None:
        return f"one of: {', '.join(validator.enum)}"
    return "any string"


def run_list(args: argparse.Namespace) -> int:
    """Print one line per validator, optionally for one namespace."""
    chosen = [v for v in VALIDATORS.values()
              if args.namespace is None or (v.namespace or BARE_NAMESPACE) == args.namespace]
    width = max(len(v.name) for v in chosen)
    for validator in chosen:
        flag = "  [deprecated]" if validator.deprecated else ""
        print(f"{validator.name:<{width}}  {validator.value_type:<4}  {allowed_values(validator)}{flag}")
    print(f"{len(chosen)} extra spec(s)")
    return 0


def run_describe(args: argparse.Namespace) -> int:
    """Explain a key; the exit status is 1 when Nova would refuse the key (or the given value)."""
    key: str = args.key
    validator = VALIDATORS.get(key) or find_validator(key)
    if validator is None:
        if is_policed_namespace(key):
            print(f"{key}: not an extra spec Nova knows, in a namespace it polices: "
                  "refused with 400 from microversion 2.86.")
            return 1
        print(f"{key}: not one of Nova's extra specs; accepted without validation (kept as is).")
        return 0

    print(key)
    if validator.name != key:
        print(f"  validator:   {validator.name}")
    print(f"  meaning:     {validator.description}")
    print(f"  value:       {allowed_values(validator)}")
    for parameter in validator.parameters:
        print(f"  {{{parameter.name}}}:{' ' * max(1, 10 - len(parameter.name))}{parameter.pattern}"
              f"  {parameter.description}")
    print(f"  deprecated:  {'yes' if validator.deprecated else 'no'}")
    concrete = key if validator.compiled_name.fullmatch(key) else validator.example_key
    for line in kubevirt_lines(concrete):
        print(f"  {line}")
    if args.value is not None:
        try:
            validate(concrete, args.value)
        except InvalidExtraSpec as refusal:
            print(f"  {args.value!r}: refused: {refusal.message}")
            return 1
        print(f"  {args.value!r}: accepted")
    return 0


def kubevirt_lookup() -> Callable[[str], Any] | None:
    """The KubeVirt mapping's per-key rule lookup, if that package ships one."""
    try:
        rules = importlib.import_module(KUBEVIRT_RULES_MODULE)
    except ModuleNotFoundError as missing:
        if missing.name is not None and KUBEVIRT_RULES_MODULE.startswith(missing.name):
            return None
        raise
    lookup = getattr(rules, "rule_for_extra_spec", None)
    return lookup if callable(lookup) else None


def kubevirt_lines(key: str) -> list[str]:
    """What KubeVirt does with a concrete key and how faithfully; empty without the mapping."""
    lookup = kubevirt_lookup()
    if lookup is None:
        return []
    rule = lookup(key)
    if rule is None:
        return ["kubevirt:    no mapping rule; kept in the flavor's extra-specs annotation only"]
    fidelity = getattr(rule, "fidelity", "")
    lines = [f"kubevirt:    {getattr(rule, 'target', '')} (fidelity: {fidelity})"]
    note = getattr(rule, "note", "")
    if note:
        lines.append(f"             {note}")
    return lines
