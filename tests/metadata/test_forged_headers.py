"""Forged, missing and replayed proxy headers at the metadata service (on each engine): whatever a guest or a
stranger sends, no other server's documents, user data or password are read, and nothing is written.

Nova 34.0.0 (nova/api/metadata/handler.py ``_handle_instance_id_request`` and ``_validate_shared_secret``):
the signature is checked before anything is looked up, at every request (a server's documents in the cache
do not spare the check); a missing header is 400, a wrong signature 403 "Invalid proxy request signature.";
without ``service_metadata_proxy`` the proxy's headers are ignored and the caller is its address."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import sqlalchemy as sa
import webob

from openkeel_compute.compute import networks
from openkeel_compute.compute.instances import deletion
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.metadata.service import MetadataApp
from tests.api.servers import oracle_state as oracle
from tests.conftest import conf_on

SECRET = "s3cr3t"
UUID = oracle.SERVER_A
PATHS = ("/openstack/latest/meta_data.json", "/openstack/latest/user_data", "/openstack/latest/password",
         "/latest/meta-data/instance-id")


@pytest.fixture
def engine(db_engine, tmp_path):
    with conf_on(db_engine, tmp_path) as conf:
        engine = db_api.get_engine(conf)
        oracle.boot_server_a(engine)
        with db_api.transaction(engine) as conn:
            conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(
                hostname="srv-a", user_data=base64.b64encode(b"#!/bin/sh\necho secret-user-data\n").decode(),
                key_name=None))
            networks.set_password(conn, UUID, "the-encrypted-password")
        yield engine


def _project(engine):
    with db_api.reader(engine) as conn:
        return conn.execute(sa.select(models.INSTANCES.c.project_id).where(models.INSTANCES.c.uuid == UUID)).scalar()


def _sign(uuid: str, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), uuid.encode(), hashlib.sha256).hexdigest()


def _request(engine, path, signature, *, uuid=UUID, extra=None, **kw):
    headers = {"X-Instance-ID": uuid, "X-Tenant-ID": _project(engine), **(extra or {})}
    if signature is not None:
        headers["X-Instance-ID-Signature"] = signature
    return webob.Request.blank(path, headers=headers, **kw)


def _leaks(body: bytes) -> bool:
    return any(word in body for word in (b"srv-a", b"secret-user-data", b"the-encrypted-password", UUID.encode()))


FORGED = {
    "zeros": "0" * 64,
    "upper case": _sign(UUID).upper(),
    "another secret": _sign(UUID, "guessed"),
    "another server's": _sign(oracle.SERVER_B),
    "empty": "",
    "truncated": _sign(UUID)[:32],
    "non-ascii": "\u00ff" * 64,
}


@pytest.mark.parametrize("forged", sorted(FORGED))
def test_a_forged_signature_reads_nothing_even_with_the_server_cached(engine, forged):
    app = MetadataApp(engine, proxy=True, shared_secret=SECRET, cache_expiration=600)
    for path in PATHS:  # the genuine proxy's requests put the server in the cache
        assert _request(engine, path, _sign(UUID)).get_response(app).status_int == 200, path
    for path in PATHS:
        got = _request(engine, path, FORGED[forged]).get_response(app)
        # Nova: 403 "Invalid proxy request signature."; a header hmac cannot compare (non-ASCII) is an error
        # of Nova's handler too (hmac.compare_digest raises): 500, nothing read
        assert got.status_int in ((500,) if forged == "non-ascii" else (403,)), (path, got.status_int)
        assert not _leaks(got.body), (path, got.body)
        if got.status_int == 403:
            assert b"Invalid proxy request signature." in got.body


def test_a_missing_signature_is_400_and_reads_nothing(engine):
    app = MetadataApp(engine, proxy=True, shared_secret=SECRET)
    for path in PATHS:
        got = _request(engine, path, None).get_response(app)
        assert got.status_int == 400 and b"X-Instance-ID-Signature header is missing from request." in got.body
        assert not _leaks(got.body)


@pytest.mark.parametrize("signature", [FORGED["zeros"], FORGED["another secret"], None])
def test_a_forged_or_unsigned_password_post_writes_nothing(engine, signature):
    app = MetadataApp(engine, proxy=True, shared_secret=SECRET, cache_expiration=0)
    with db_api.transaction(engine) as conn:
        networks.set_password(conn, UUID, "")
    got = _request(engine, "/openstack/latest/password", signature, method="POST", body=b"planted").get_response(app)
    assert got.status_int in (400, 403)
    with db_api.reader(engine) as conn:
        assert networks.password_of(conn, UUID) == ""


def test_without_the_proxy_its_headers_name_no_server(engine):
    """A guest that sends another server's id (even correctly signed, the secret leaked) is still the
    server its address is; a stranger's address is nobody, whatever its headers say."""
    app = MetadataApp(engine, proxy=False, shared_secret=SECRET)
    for path in PATHS:
        got = _request(engine, path, _sign(UUID), remote_addr="10.9.9.9",
                       extra={"X-Forwarded-For": "192.168.1.31"}).get_response(app)
        assert got.status_int == 404 and not _leaks(got.body), path
    # another server's id from server A's address: server A's documents, nothing of the other
    got = _request(engine, PATHS[0], _sign(oracle.SERVER_B), uuid=oracle.SERVER_B,
                   remote_addr="192.168.1.31").get_response(app)
    assert got.status_int == 200 and got.json["uuid"] == UUID


def test_a_deleted_servers_signed_requests_find_nothing(engine):
    app = MetadataApp(engine, proxy=True, shared_secret=SECRET, cache_expiration=0)
    assert _request(engine, PATHS[0], _sign(UUID)).get_response(app).status_int == 200
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, UUID)
    for path in PATHS:
        got = _request(engine, path, _sign(UUID)).get_response(app)
        assert got.status_int == 404 and not _leaks(got.body), path
