"""The EC2 ``security-groups`` of the metadata service with [neutron] (an in-memory Neutron over HTTP,
tests/network/fake_neutron.py): the groups of the server's ports as Nova 34.0.0's InstanceMetadata reads them
(nova/api/metadata/base.py, ``security_group_api.get_instance_security_groups`` with an admin context, so
[neutron]'s credential), not the names kept at boot; kept with the documents for [api]
metadata_cache_expiration seconds, as Nova's cache keeps its InstanceMetadata. Without [neutron], the names
kept at boot, and keystoneauth is never loaded. SQLite only: nothing here writes state."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sqlalchemy as sa
import webob

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.metadata.service import UNKNOWN, MetadataApp
from openkeel_compute.model import sysmeta
from tests.api.servers import oracle_state as oracle
from tests.conftest import conf_on
from tests.network.fake_neutron import FakeNeutron

UUID = oracle.SERVER_A
ADDRESS = "192.168.1.31"  # srv-a's fixed IP: the caller is found by its address
GROUPS = "/latest/meta-data/security-groups"


@pytest.fixture
def neutron():
    fake = FakeNeutron()
    server, fake.url = fake.serve()
    yield fake
    server.shutdown()
    server.server_close()


def _booted(conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    with db_api.transaction(engine) as conn:  # what the API keeps at boot: the names asked for
        conn.execute(sa.insert(models.INSTANCE_SYSTEM_METADATA).values(
            instance_uuid=UUID, key=sysmeta.SECURITY_GROUPS, value=json.dumps(["kept-at-boot"]), deleted=0))
    return engine


@pytest.fixture
def world(tmp_path, neutron):
    """(the metadata service made from its configuration with [neutron] at the fake, the fake, a clock)"""
    now = [0.0]
    section = {"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
               "endpoint_override": neutron.url, "http_retries": "0"}
    with conf_on("sqlite", tmp_path, neutron=section) as conf:
        app = MetadataApp.from_conf(conf, _booted(conf))
        app.cache.clock = lambda: now[0]
        yield app, neutron, now
        db_api.dispose_all()


def _get(app, path=GROUPS):
    return webob.Request.blank(path, remote_addr=ADDRESS).get_response(app)


def test_the_groups_of_the_ports_port_after_port(world):
    app, neutron, _now = world
    net = neutron.network()
    default, web, nameless = (neutron.security_group(n) for n in ("default", "web", ""))
    gone = neutron.security_group("gone")
    neutron.port(net, device_id=UUID, security_groups=[default["id"]])
    neutron.port(net, device_id=UUID, security_groups=[default["id"], web["id"], gone["id"], nameless["id"]])
    neutron.port(net, device_id="another-server", security_groups=[web["id"]])
    del neutron.security_groups[gone["id"]]  # a group Neutron does not show is left out
    got = _get(app)
    assert (got.status_int, got.content_type) == (200, "text/plain")
    # a group on two ports is there twice; a group without a name is shown by its id
    assert got.text.split("\n") == ["default", "default", "web", nameless["id"]]
    # Nova's two queries, with [neutron]'s credential (the guest's request has no token)
    asked = [(r["path"], r["query"], r["token"]) for r in neutron.requests]
    assert asked == [
        ("/v2.0/ports", {"device_id": [UUID], "fields": ["security_groups", "device_id"]}, "neutron-admin"),
        ("/v2.0/security-groups", {"id": [default["id"], web["id"], gone["id"], nameless["id"]],
                                   "fields": ["id", "name"]}, "neutron-admin")]
    # the other documents are read with them: one Neutron reading per server and expiration
    assert "security-groups" in _get(app, "/2009-04-04/meta-data/").text.split("\n")
    assert _get(app, "/openstack/latest/meta_data.json").json["uuid"] == UUID
    assert len(neutron.requests) == 2


def test_a_server_without_ports_has_none(world):
    app, neutron, _now = world
    neutron.security_group("default")
    got = _get(app)
    assert (got.status_int, got.body) == (200, b"")  # not the names kept at boot
    assert "security-groups" in _get(app, "/latest/meta-data/").text.split("\n")  # the key is still listed
    assert [r["path"] for r in neutron.requests] == ["/v2.0/ports"]  # no group to ask about


def test_kept_with_the_documents_until_they_expire(world):
    app, neutron, now = world
    net = neutron.network()
    default, web = neutron.security_group("default"), neutron.security_group("web")
    port = neutron.port(net, device_id=UUID, security_groups=[default["id"]])
    assert _get(app).text == "default"
    port["security_groups"] = [web["id"]]  # changed in Neutron itself
    assert _get(app).text == "default"  # Nova's cache keeps the InstanceMetadata it read them with
    now[0] = 16.0  # [api] metadata_cache_expiration = 15
    assert _get(app).text == "web"


@pytest.mark.parametrize(("status", "code"), [(500, 503), (404, 503), (401, 500)])
def test_neutron_failing(world, status, code):
    """Nova answers 500 with its words for any failure; OpenKeel 503 when Neutron fails (a guest retries),
    500 when it refuses [neutron]'s credential (the operator's to fix); nothing is kept either way."""
    app, neutron, _now = world
    net = neutron.network()
    default = neutron.security_group("default")
    neutron.port(net, device_id=UUID, security_groups=[default["id"]])
    neutron.fail_with = status
    got = _get(app)
    assert got.status_int == code
    assert UNKNOWN in got.text and "Neutron" not in got.text  # what Neutron did is for the log only
    assert _get(app, "/openstack/latest/meta_data.json").status_int == code  # every document needs them
    neutron.fail_with = None
    assert _get(app).text == "default"


def test_neutron_unreachable(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    section = {"auth_type": "admin_token", "endpoint": closed, "token": "t", "endpoint_override": closed,
               "http_retries": "0"}
    with conf_on("sqlite", tmp_path, neutron=section) as conf:
        app = MetadataApp.from_conf(conf, _booted(conf))
        got = _get(app)
        db_api.dispose_all()
    assert (got.status_int, UNKNOWN in got.text) == (503, True)


def test_without_neutron_the_names_kept_at_boot(tmp_path):
    with conf_on("sqlite", tmp_path) as conf:
        app = MetadataApp.from_conf(conf, _booted(conf))
        assert app.security_groups is None
        assert _get(app).text == "kept-at-boot"
        db_api.dispose_all()


PROBE = """
import json, os, sys
from openkeel_compute.conf import build_conf
from openkeel_compute.metadata.service import MetadataApp
seen = []
for path in sys.argv[1:]:
    if path == sys.argv[-1]:  # [neutron] options from the environment only, as deploy/ gives the secret
        os.environ.update(OS_NEUTRON__SERVICE_METADATA_PROXY="true", OS_NEUTRON__METADATA_PROXY_SHARED_SECRET="s")
    app = MetadataApp.from_conf(build_conf(["--config-file", path]), None)
    seen.append([app.proxy, app.secret, app.security_groups is None, "keystoneauth1" in sys.modules])
print(json.dumps(seen))
"""


def test_keystoneauth_only_with_a_neutron_section(tmp_path):
    """The service without [neutron] (a cluster on the pod network) never loads keystoneauth; with a
    section (or [neutron] options in the environment) it reads it, and asks Neutron only with a credential
    (auth_type)."""
    sections = ["", "[neutron]\nservice_metadata_proxy = true\n",
                "[neutron]\nauth_type = admin_token\ntoken = t\nendpoint = http://n.test\n", ""]
    paths = []
    for i, section in enumerate(sections):
        path = tmp_path / f"m{i}.conf"
        path.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n{section}")
        paths.append(str(path))
    out = subprocess.run([sys.executable, "-c", PROBE, *paths], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [
        [False, "", True, False], [True, "", True, True], [False, "", False, True], [True, "s", True, True]]
