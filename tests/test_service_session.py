"""One keystoneauth session from a configuration group (service_session.py), shared by the clients of the
services OpenKeel calls: the group's session options, its own credential loaded once, adapters that call
as the identity given with the group's adapter options, and who a caller's call is made as."""

from __future__ import annotations

import http.server
import json
import threading
import types
from typing import ClassVar

import pytest
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import token_endpoint

from openkeel_compute import conf as conf_mod
from openkeel_compute.caller_auth import HeaderCatalogAuth
from openkeel_compute.conf import neutron as neutron_conf
from openkeel_compute.images import glance
from openkeel_compute.network.client import NeutronClient
from openkeel_compute.placement import client as placement_client
from openkeel_compute.service_session import ConfSession, caller_auth


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self):
        type(self).seen.append((self.path, self.headers.get("X-Auth-Token")))
        body = json.dumps({"path": self.path}).encode()
        self.send_response(404 if self.path.endswith("/missing") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Recorder,), {"seen": []}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _glance_conf(**overrides):
    conf = conf_mod.build_conf()
    glance.register_opts(conf)
    for name, value in overrides.items():
        conf.set_override(name, value, group=glance.GROUP)
    return conf


def _neutron_conf(**overrides):
    conf = conf_mod.build_conf()
    neutron_conf.register_neutron_opts(conf)
    if overrides.get("auth_type") == "admin_token":
        conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="neutron")
    for name, value in overrides.items():
        conf.set_override(name, value, group="neutron")
    return conf


def test_the_session_has_the_groups_session_options():
    keystone = ConfSession(_glance_conf(timeout=7, insecure=True), glance.GROUP)
    assert keystone.session.timeout == 7.0 and keystone.session.verify is False
    assert keystone.session.auth is None  # each adapter names who it calls as
    assert ConfSession(_glance_conf(), glance.GROUP).session.timeout is None


def test_the_groups_credential_is_loaded_once_and_none_without_auth_type():
    assert ConfSession(_neutron_conf(), "neutron").credential() is None
    keystone = ConfSession(_neutron_conf(auth_type="admin_token", endpoint="http://n", token="t"), "neutron")
    first = keystone.credential()
    assert isinstance(first, token_endpoint.Token) and first.get_token(keystone.session) == "t"
    assert keystone.credential() is first
    carried = ConfSession(_neutron_conf(auth_type="admin_token", endpoint="http://n", token="t"), "neutron",
                          authenticated=True)
    assert carried.session.auth is carried.credential()


def test_an_adapter_calls_as_the_identity_given_with_the_groups_options(service):
    url = f"http://127.0.0.1:{service.server_address[1]}"
    keystone = ConfSession(_glance_conf(endpoint_override=url + "/group"), glance.GROUP)
    caller = token_endpoint.Token(None, "caller-token")
    adapter = keystone.adapter(caller)
    assert adapter.service_type == "image" and adapter.interface == ["internal", "public"]
    assert adapter.get("/images").json() == {"path": "/group/images"}
    missing = adapter.get("/missing")  # an answer, not an exception: each client makes its own errors
    assert missing.status_code == 404
    elsewhere = keystone.adapter(token_endpoint.Token(None, "other"), endpoint_override=url + "/there")
    assert elsewhere.get("/images").json() == {"path": "/there/images"}
    assert service.RequestHandlerClass.seen == [("/group/images", "caller-token"), ("/group/missing", "caller-token"),
                                                ("/there/images", "other")]


def test_who_a_callers_call_is_made_as():
    plugin = token_endpoint.Token(None, "mw")
    context = types.SimpleNamespace(auth_token="tok", environ={})
    assert caller_auth(context, {"keystone.token_auth": plugin}) is plugin  # keystonemiddleware's, first
    from_headers = caller_auth(context, {"HTTP_X_SERVICE_CATALOG": "[]"})
    assert isinstance(from_headers, HeaderCatalogAuth) and from_headers.get_token(None) == "tok"
    assert caller_auth(types.SimpleNamespace(auth_token=None, environ={}), None) is None  # noauth2, no token
    in_context = types.SimpleNamespace(auth_token=None, environ={"keystone.token_auth": plugin})
    assert caller_auth(in_context, None) is plugin  # the context's environ when none is given


def test_the_clients_share_it(service, tmp_path):
    url = f"http://127.0.0.1:{service.server_address[1]}"
    glance_client = glance.GlanceClient(_glance_conf(timeout=5))
    assert glance_client.session.timeout == 5.0
    neutron = NeutronClient(_neutron_conf(auth_type="admin_token", endpoint=url, token="admin-t",
                                          endpoint_override=url, timeout=9))
    assert neutron.session.timeout == 9.0
    admin = neutron.admin()
    assert admin.auth is neutron.admin().auth  # the [neutron] credential, loaded once
    assert admin.adapter.session is neutron.session and admin.adapter.get("/v2.0/x").status_code == 200
    assert service.RequestHandlerClass.seen[-1] == ("/v2.0/x", "admin-t")
    conf = conf_mod.build_conf()
    placement_client.register_opts(conf)
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="placement")
    for name, value in {"auth_type": "admin_token", "endpoint": url, "token": "p-t", "timeout": 4}.items():
        conf.set_override(name, value, group="placement")
    placement = placement_client.PlacementClient.from_conf(conf)
    assert placement.adapter.session.timeout == 4.0
    assert placement.adapter.session.auth is placement.adapter.auth
    assert placement.adapter.auth.get_token(placement.adapter.session) == "p-t"
