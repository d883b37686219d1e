"""Key pairs, quotas, quota classes and limits against the real Nova 34.0.0 servers API.

The same exchanges go, in order, to a fresh servers oracle (../shared/nova-oracle) and to a fresh
OpenKeel app; status and body must be equal once the values that are random by nature (generated
keys, their fingerprints, ids, times) are replaced by their kind. Skips without ../shared.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.api.keypairs_quotas.helpers import ED25519
from tests.api.oracles import free_port, oracle_script


def _certificate() -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


CERT = _certificate()
U = "kq-user:kq-project"
U2 = "kq-other:kq-project"
ADMIN = "admin:admin"


def _kp(name, **extra):
    return {"keypair": dict(name=name, **extra)}


# (method, path, token, version, body)
EXCHANGES = [
    ("POST", "/os-keypairs", U, "2.1", _kp("gen-v21")),
    ("POST", "/os-keypairs", U, "2.2", _kp("gen-ssh")),
    ("POST", "/os-keypairs", U, "2.2", _kp("gen-x509", type="x509")),
    ("POST", "/os-keypairs", U, "2.2", _kp("imp-ed", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("imp-ed", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("imp-x509", type="x509", public_key=CERT)),
    ("POST", "/os-keypairs", U, "2.2", _kp("bad", public_key="ssh-rsa AAAA bad")),
    ("POST", "/os-keypairs", U, "2.2", _kp("bad", public_key="")),
    ("POST", "/os-keypairs", U, "2.2", _kp("badx", type="x509", public_key="not a cert")),
    ("POST", "/os-keypairs", U, "2.2", _kp("bad", type="rsa", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("with.dot", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.92", _kp("with.dot@x", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.92", _kp("gen-292")),
    ("POST", "/os-keypairs", U, "2.2", _kp(" spaced ", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("x" * 256, public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("ok", public_key=ED25519, user_id="someone")),
    ("POST", "/os-keypairs", U, "2.10", _kp("ok", public_key=ED25519, user_id="someone")),
    ("POST", "/os-keypairs", ADMIN, "2.10", _kp("for-other", public_key=ED25519, user_id="kq-user")),
    ("POST", "/os-keypairs", U, "2.2", {"keypair": {"name": "k", "extra": 1}}),
    ("POST", "/os-keypairs", U, "2.2", {"nokeypair": {}}),
    ("GET", "/os-keypairs", U, "2.1", None),
    ("GET", "/os-keypairs", U, "2.2", None),
    ("GET", "/os-keypairs?limit=2", U, "2.35", None),
    ("GET", "/os-keypairs?limit=2&marker=gen-ssh", U, "2.35", None),
    ("GET", "/os-keypairs?marker=nope", U, "2.35", None),
    ("GET", "/os-keypairs?limit=-1", U, "2.35", None),
    ("GET", "/os-keypairs?limit=abc", U, "2.35", None),
    ("GET", "/os-keypairs?foo=1", U, "2.74", None),
    ("GET", "/os-keypairs?foo=1", U, "2.75", None),
    ("GET", "/os-keypairs?user_id=kq-user", U2, "2.10", None),
    ("GET", "/os-keypairs?user_id=kq-user", ADMIN, "2.10", None),
    ("GET", "/os-keypairs/imp-ed", U, "2.1", None),
    ("GET", "/os-keypairs/imp-ed", U, "2.2", None),
    ("GET", "/os-keypairs/nope", U, "2.2", None),
    ("GET", "/os-keypairs/imp-ed", U2, "2.2", None),
    ("GET", "/os-keypairs/imp-ed?user_id=kq-user", U2, "2.10", None),
    ("GET", "/os-keypairs/imp-ed?user_id=kq-user", ADMIN, "2.10", None),
    ("DELETE", "/os-keypairs/gen-v21", U, "2.1", None),
    ("DELETE", "/os-keypairs/gen-ssh", U, "2.2", None),
    ("DELETE", "/os-keypairs/gen-ssh", U, "2.2", None),
    ("DELETE", "/os-keypairs/for-other?user_id=kq-user", ADMIN, "2.10", None),
    # quotas
    ("GET", "/os-quota-sets/kq-project", U, "2.1", None),
    ("GET", "/os-quota-sets/kq-project", U, "2.36", None),
    ("GET", "/os-quota-sets/kq-project", U, "2.57", None),
    ("GET", "/os-quota-sets/kq-project/detail", U, "2.57", None),
    ("GET", "/os-quota-sets/kq-project/defaults", U, "2.1", None),
    ("GET", "/os-quota-sets/other-project", U, "2.1", None),
    ("PUT", "/os-quota-sets/kq-project", U, "2.1", {"quota_set": {"cores": 5}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.1", {"quota_set": {"cores": 5, "instances": "4"}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"cores": -2}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"cores": "x"}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"injected_files": 3}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"floating_ips": 3}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.1", {"quota_set": {"floating_ips": 3}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"bogus": 3}}),
    ("PUT", "/os-quota-sets/kq-project?user_id=kq-user", ADMIN, "2.57", {"quota_set": {"cores": 3}}),
    ("PUT", "/os-quota-sets/kq-project?user_id=kq-user", ADMIN, "2.57", {"quota_set": {"cores": 9}}),
    ("PUT", "/os-quota-sets/kq-project?user_id=kq-user", ADMIN, "2.57", {"quota_set": {"cores": 9, "force": True}}),
    ("GET", "/os-quota-sets/kq-project?user_id=kq-user", U, "2.57", None),
    ("GET", "/os-quota-sets/kq-project/detail?user_id=kq-user", U, "2.57", None),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"cores": 4}}),
    ("PUT", "/os-quota-sets/kq-project", ADMIN, "2.57", {"quota_set": {"key_pairs": 1}}),
    ("POST", "/os-keypairs", U, "2.2", _kp("over", public_key=ED25519)),
    ("POST", "/os-keypairs", U, "2.2", _kp("over", public_key="bad key")),
    ("DELETE", "/os-quota-sets/kq-project?user_id=kq-user", ADMIN, "2.57", None),
    ("GET", "/limits", U, "2.1", None),
    ("GET", "/limits", U, "2.36", None),
    ("GET", "/limits", U, "2.39", None),
    ("GET", "/limits", U, "2.57", None),
    ("GET", "/limits?tenant_id=other", U, "2.57", None),
    ("GET", "/limits?tenant_id=kq-project", ADMIN, "2.57", None),
    ("GET", "/limits?foo=1", U, "2.75", None),
    ("DELETE", "/os-quota-sets/kq-project", U, "2.57", None),
    ("DELETE", "/os-quota-sets/kq-project", ADMIN, "2.57", None),
    ("GET", "/os-quota-sets/kq-project", U, "2.57", None),
    # quota classes
    ("GET", "/os-quota-class-sets/default", U, "2.1", None),
    ("GET", "/os-quota-class-sets/default", ADMIN, "2.1", None),
    ("GET", "/os-quota-class-sets/default", ADMIN, "2.50", None),
    ("GET", "/os-quota-class-sets/default", ADMIN, "2.57", None),
    ("PUT", "/os-quota-class-sets/default", ADMIN, "2.57", {"quota_class_set": {"instances": 7, "ram": "1024"}}),
    ("PUT", "/os-quota-class-sets/default", ADMIN, "2.57", {"quota_class_set": {"fixed_ips": 7}}),
    ("PUT", "/os-quota-class-sets/gold", ADMIN, "2.1", {"quota_class_set": {"cores": 70}}),
    ("GET", "/os-quota-class-sets/gold", ADMIN, "2.1", None),
    ("GET", "/os-quota-sets/kq-project/defaults", U, "2.57", None),
    ("GET", "/os-quota-sets/kq-project", U, "2.57", None),
    ("GET", "/limits", U, "2.57", None),
    # availability zones (no node published yet: the default zone, as the oracle's one zone)
    ("GET", "/os-availability-zone", U, "2.1", None),
    ("GET", "/os-availability-zone/detail", U, "2.1", None),
    ("GET", "/os-availability-zone?foo=1", U, "2.102", None),
]

IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
B = "kq-boot:kq-boot"


def server_body(flavor, **fields):
    return {"server": {"name": "q", "imageRef": IMAGE, "flavorRef": flavor, "networks": "none", **fields}}


# Boots refused by quotas on an empty project (deterministic: nothing is being built meanwhile).
BOOT_EXCHANGES = [
    ("PUT", "/os-quota-sets/kq-boot", ADMIN, "2.57",
     {"quota_set": {"cores": 3, "instances": 2, "ram": 2048, "metadata_items": 1}}),
    ("POST", "/servers", B, "2.96", server_body("3", min_count=2)),
    ("POST", "/servers", B, "2.96", server_body("1", min_count=3)),
    ("POST", "/servers", B, "2.96", server_body("1", min_count=3, max_count=4)),
    ("POST", "/servers", B, "2.96", server_body("3", min_count=1, max_count=1, metadata={"a": "1", "b": "2"})),
    ("POST", "/servers", B, "2.96", server_body("1", availability_zone="nowhere")),
    ("POST", "/servers", B, "2.96", server_body("99", availability_zone="nowhere")),
    ("POST", "/servers", B, "2.96", server_body("1", key_name="nokey")),
    ("PUT", "/os-quota-sets/kq-boot", ADMIN, "2.57", {"quota_set": {"cores": -1, "ram": 1024}}),
    ("POST", "/servers", B, "2.96", server_body("1", min_count=3)),
]

_RANDOM = {"private_key", "fingerprint", "created_at", "id", "request_id"}


def _is_generated(public_key) -> bool:
    return isinstance(public_key, str) and (public_key.endswith(" Generated-by-Nova") or (
        public_key.startswith("-----BEGIN CERTIFICATE-----") and public_key != CERT))


def _normalise(body, generated: bool):
    if isinstance(body, dict):
        out = {}
        for key, value in body.items():
            if key in _RANDOM and isinstance(value, str | int) and not isinstance(value, bool):
                out[key] = f"<{key}>"
            elif key == "public_key" and (generated or _is_generated(value)):
                out[key] = "<generated>"
            elif key == "href":
                out[key] = value.split("/v2.1", 1)[1]
            else:
                out[key] = _normalise(value, generated)
        return out
    if isinstance(body, list):
        return [_normalise(v, generated) for v in body]
    return body


def _free_port() -> int:
    """A port the system says is free (tests/api/oracles.free_port): two test workers running this module's
    tests at once each start an oracle of their own, never one on the other's port (the oracle script's pid
    file is per port: a shared port meant one worker's stop killing the other's oracle)."""
    return free_port()


@pytest.fixture(scope="module")
def _oracles():
    """The oracles of the module, one per database engine (started when first asked for): the exchanges
    create key pairs and set quotas, so each engine's run needs an oracle as fresh as the first's."""
    script = oracle_script("run-servers-oracle.sh")
    started: dict[str, int] = {}

    def url(engine: str) -> str:
        if os.environ.get("OPENKEEL_SERVERS_ORACLE_URL"):  # an oracle already running (fresh)
            return os.environ["OPENKEEL_SERVERS_ORACLE_URL"]
        if engine not in started:
            port = _free_port()
            subprocess.run([str(script), "start", str(port)], check=True, capture_output=True, timeout=600)
            started[engine] = port
        return f"http://127.0.0.1:{started[engine]}"

    try:
        yield url
    finally:
        for port in started.values():
            subprocess.run([str(script), "stop", str(port)], check=False, capture_output=True, timeout=120)


@pytest.fixture
def oracle_url(_oracles, db_engine):
    return _oracles(db_engine)


def _oracle(base, method, path, token, version, body):
    req = urllib.request.Request(base + "/v2.1" + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _ours(client, method, path, token, version, body):
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}
    result = client.request(method, "/v2.1" + path, headers=headers, json_body=body)
    return result.status_code, result.content


def _decoded(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return "<not json>"


def test_keypairs_quotas_and_limits_answer_as_nova(oracle_url, client):
    _compare(oracle_url, client, EXCHANGES)


def test_boots_refused_by_quotas_answer_as_nova(oracle_url, client, conf, tmp_path):
    from openkeel_compute.catalog import flavors as catalog
    from openkeel_compute.db import api as db_api
    from tests.api.servers.helpers import local_image_service

    with db_api.transaction(db_api.get_engine(conf)) as conn:  # the oracle's m1.tiny and m1.medium
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
        catalog.create(conn, name="m1.medium", memory_mb=4096, vcpus=2, root_gb=40, flavorid="3")
    with local_image_service(conf, tmp_path):
        _compare(oracle_url, client, BOOT_EXCHANGES)


def _compare(oracle_url, client, exchanges):
    mismatches = []
    for method, path, token, version, body in exchanges:
        o_status, o_raw = _oracle(oracle_url, method, path, token, version, body)
        s_status, s_raw = _ours(client, method, path, token, version, body)
        generated = method == "POST" and isinstance(body, dict) and "public_key" not in body.get("keypair", {"x": 1})
        o_body, s_body = _normalise(_decoded(o_raw), generated), _normalise(_decoded(s_raw), generated)
        if (o_status, o_body) != (s_status, s_body):
            mismatches.append(f"{method} {path} @{version} as {token}: nova {o_status} {str(o_body)[:600]}\n"
                              f"    openkeel {s_status} {str(s_body)[:600]}")
    assert not mismatches, "\n".join(mismatches)
