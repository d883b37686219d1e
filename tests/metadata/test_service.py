"""The metadata service (metadata/service.py) on each database engine: Nova 34.0.0's metadata API answers
(nova/api/metadata/handler.py and base.py, read in the oracle's virtualenv): the caller identified by
Neutron's proxy headers (HMAC-SHA256 with the shared secret) or by its fixed IP, 400/403/404 in Nova's
words, the OpenStack and EC2 documents, the password a guest posts, the cache."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
import sqlalchemy as sa
import webob

from openkeel_compute.compute import networks
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.metadata.service import MetadataApp
from tests.api.servers import oracle_state as oracle
from tests.conftest import conf_on

SECRET = "s3cr3t"
UUID = oracle.SERVER_A


@pytest.fixture
def engine(db_engine, tmp_path):
    with conf_on(db_engine, tmp_path) as conf:
        engine = db_api.get_engine(conf)
        oracle.boot_server_a(engine)
        with db_api.transaction(engine) as conn:
            conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(
                hostname="srv-a", user_data=base64.b64encode(b"#!/bin/sh\necho hi\n").decode(),
                key_name=None))
            conn.execute(sa.insert(models.INSTANCE_METADATA).values(
                instance_uuid=UUID, key="role", value="web", deleted=0))
        yield engine


def _project(engine):
    with db_api.reader(engine) as conn:
        return conn.execute(sa.select(models.INSTANCES.c.project_id).where(models.INSTANCES.c.uuid == UUID)).scalar()


def _signed(engine, path="/openstack/latest/meta_data.json", *, uuid=UUID, project=None, signature=None, **kw):
    headers = {"X-Instance-ID": uuid, "X-Tenant-ID": project or _project(engine),
               "X-Instance-ID-Signature": signature or hmac.new(SECRET.encode(), uuid.encode(),
                                                                hashlib.sha256).hexdigest()}
    return webob.Request.blank(path, headers=headers, **kw)


def _proxy(engine, **kw):
    return MetadataApp(engine, proxy=True, shared_secret=SECRET, **kw)


def test_the_root_lists_the_ec2_versions_without_asking_who(engine):
    got = webob.Request.blank("/").get_response(_proxy(engine))
    assert (got.status_int, got.content_type) == (200, "text/plain")
    assert got.text.split("\n") == ["1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15",
                                    "2008-02-01", "2008-09-01", "2009-04-04", "latest"]


def test_the_proxy_headers_as_nova_checks_them(engine):
    app = _proxy(engine)
    for missing, words in (("X-Instance-ID", "X-Instance-ID header is missing from request."),
                           ("X-Instance-ID-Signature", "X-Instance-ID-Signature header is missing from request."),
                           ("X-Tenant-ID", "X-Tenant-ID header is missing from request.")):
        req = _signed(engine)
        del req.headers[missing]
        got = req.get_response(app)
        assert got.status_int == 400 and words in got.text, missing
    got = _signed(engine, signature="0" * 64).get_response(app)
    assert got.status_int == 403 and "Invalid proxy request signature." in got.text
    # a forged id with another server's signature
    got = _signed(engine, uuid=oracle.SERVER_B, signature=hmac.new(
        SECRET.encode(), UUID.encode(), hashlib.sha256).hexdigest()).get_response(app)
    assert got.status_int == 403
    # another project's tenant id: not found, as Nova
    assert _signed(engine, project="other").get_response(app).status_int == 404
    # a server that does not exist, signed correctly
    assert _signed(engine, uuid=oracle.SERVER_B).get_response(app).status_int == 404


def test_meta_data_json(engine):
    got = _signed(engine).get_response(_proxy(engine))
    assert (got.status_int, got.content_type) == (200, "application/json")
    body = got.json
    assert {k: body[k] for k in ("uuid", "meta", "hostname", "name", "launch_index", "availability_zone",
                                 "project_id", "devices", "dedicated_cpus")} == {
        "uuid": UUID, "meta": {"role": "web"}, "hostname": "srv-a.novalocal", "name": "srv-a", "launch_index": 0,
        "availability_zone": "nova", "project_id": _project(engine), "devices": [], "dedicated_cpus": []}
    assert len(base64.b64decode(body["random_seed"])) == 512
    # an old version has fewer fields
    old = _signed(engine, "/openstack/2012-08-10/meta_data.json").get_response(_proxy(engine)).json
    assert "random_seed" not in old and "project_id" not in old


def test_the_other_documents(engine):
    app = _proxy(engine)
    listing = _signed(engine, "/openstack/latest").get_response(app).text.split("\n")
    assert listing == ["meta_data.json", "user_data", "password", "vendor_data.json", "network_data.json",
                       "vendor_data2.json"]
    assert _signed(engine, "/openstack/2012-08-10").get_response(app).text.split("\n") == [
        "meta_data.json", "user_data"]
    assert _signed(engine, "/openstack/latest/user_data").get_response(app).body == b"#!/bin/sh\necho hi\n"
    network = _signed(engine, "/openstack/latest/network_data.json").get_response(app)
    assert network.content_type == "text/plain"
    assert json.loads(network.body) == {
        "links": [{"id": "tap0", "vif_id": None, "type": "phy", "mtu": None,
                   "ethernet_mac_address": "00:0c:29:0d:11:74"}],
        "networks": [{"id": "network0", "type": "ipv4_dhcp", "link": "tap0", "network_id": "private"}],
        "services": []}
    assert _signed(engine, "/openstack/latest/vendor_data.json").get_response(app).json == {}
    assert _signed(engine, "/openstack/latest/vendor_data2.json").get_response(app).json == {"static": {}}
    for missing in ("/openstack/latest/nothing", "/openstack/1999-01-01/meta_data.json",
                    "/openstack/2012-08-10/vendor_data.json", "/2009-04-04/meta-data/nothing", "/1999/meta-data"):
        assert _signed(engine, missing).get_response(app).status_int == 404, missing


def test_the_ec2_tree(engine):
    app = _proxy(engine)
    listing = _signed(engine, "/2009-04-04/meta-data/").get_response(app).text.split("\n")
    assert listing == ["ami-id", "ami-launch-index", "ami-manifest-path", "block-device-mapping/", "hostname",
                       "instance-action", "instance-id", "instance-type", "local-hostname", "local-ipv4",
                       "placement/", "public-hostname", "public-ipv4", "reservation-id", "security-groups"]
    assert _signed(engine, "/latest/meta-data/local-ipv4").get_response(app).text == "192.168.1.31"
    assert _signed(engine, "/2009-04-04/meta-data/placement/availability-zone").get_response(app).text == "nova"
    assert _signed(engine, "/2009-04-04/meta-data/instance-type").get_response(app).text == "priv.small"
    assert _signed(engine, "/1.0/meta-data/").get_response(app).text.split("\n") == [
        "ami-id", "ami-launch-index", "ami-manifest-path", "hostname", "instance-id", "local-ipv4",
        "reservation-id", "security-groups"]
    assert _signed(engine, "/2009-04-04/user-data").get_response(app).body == b"#!/bin/sh\necho hi\n"


def test_the_caller_found_by_its_fixed_ip(engine):
    app = MetadataApp(engine)
    req = webob.Request.blank("/openstack/latest/meta_data.json", remote_addr="192.168.1.31")
    assert req.get_response(app).json["uuid"] == UUID
    assert webob.Request.blank("/openstack/latest/meta_data.json",
                               remote_addr="10.9.9.9").get_response(app).status_int == 404
    # the proxy's headers are not trusted without service_metadata_proxy
    assert _signed(engine, remote_addr="10.9.9.9").get_response(app).status_int == 404
    # X-Forwarded-For only with use_forwarded_for
    forwarded = {"X-Forwarded-For": "192.168.1.31, 10.0.0.1"}
    assert webob.Request.blank("/openstack/latest/meta_data.json", remote_addr="10.9.9.9",
                               headers=forwarded).get_response(app).status_int == 404
    trusting = MetadataApp(engine, use_forwarded_for=True)
    assert webob.Request.blank("/openstack/latest/meta_data.json", remote_addr="10.9.9.9",
                               headers=forwarded).get_response(trusting).json["uuid"] == UUID


def test_the_password_a_guest_posts(engine):
    app = _proxy(engine, cache_expiration=0)
    path = "/openstack/latest/password"
    assert _signed(engine, path).get_response(app).body == b""
    assert _signed(engine, path, method="POST", body=b"x" * 1021).get_response(app).status_int == 400
    assert _signed(engine, path, method="POST", body=b"encrypted").get_response(app).status_int == 200
    assert _signed(engine, path).get_response(app).body == b"encrypted"
    assert _signed(engine, path, method="POST", body=b"again").get_response(app).status_int == 409
    assert _signed(engine, path, method="PUT", body=b"x").get_response(app).status_int == 400
    with db_api.reader(engine) as conn:
        assert networks.password_of(conn, UUID) == "encrypted"


def test_the_cache_keeps_a_server_for_its_expiration(engine):
    now = [0.0]
    app = _proxy(engine, cache_expiration=15, clock=lambda: now[0])
    assert _signed(engine).get_response(app).json["name"] == "srv-a"
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(display_name="new"))
    assert _signed(engine).get_response(app).json["name"] == "srv-a"
    now[0] = 16.0
    assert _signed(engine).get_response(app).json["name"] == "new"
