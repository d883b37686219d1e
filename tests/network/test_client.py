"""[neutron] and [DEFAULT] vif_plugging_* as Nova's, and the Neutron client over keystoneauth: who
each call is made as (the caller's token, the [service_user] token beside it, the [neutron]
credential) and how Neutron's answers become errors."""

from __future__ import annotations

import socket
import types

import pytest

from openkeel_compute import conf as conf_mod
from openkeel_compute.conf import neutron as neutron_conf
from openkeel_compute.network import client as client_mod
from openkeel_compute.network import errors


def _conf(**neutron):
    conf = conf_mod.build_conf()
    neutron_conf.register_neutron_opts(conf)  # as the code that reads [neutron] does
    for name, value in neutron.items():
        conf.set_override(name, value, group="neutron")
    return conf


def token_conf(url: str, token: str = "neutron-admin", **neutron):
    """[neutron] with keystoneauth's admin_token plugin: a fixed token, Neutron at ``url``."""
    from keystoneauth1 import loading as ks_loading

    conf = _conf(auth_type="admin_token", endpoint_override=url, **neutron)
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="neutron")
    conf.set_override("endpoint", url, group="neutron")
    conf.set_override("token", token, group="neutron")
    return conf


def _context(token="demo-token", project="demo", is_admin=False):
    return types.SimpleNamespace(auth_token=token, project_id=project, user_id="u", is_admin=is_admin, environ={})


def test_options_have_novas_names_and_defaults():
    conf = conf_mod.build_conf()
    assert "neutron" not in conf  # registered at its first use: a worker that never meets Neutron skips keystoneauth
    assert not neutron_conf.configured(conf)  # unset: the pod network, as scripts/serve runs by default
    assert "neutron" not in conf  # no [neutron] section: known without registering keystoneauth's options
    assert conf.vif_plugging_is_fatal is True
    assert conf.vif_plugging_timeout == 300
    neutron_conf.register_neutron_opts(conf)
    assert conf.neutron.service_type == "network"
    assert conf.neutron.valid_interfaces == ["internal", "public"]
    assert conf.neutron.auth_type is None
    assert conf.neutron.region_name is None and conf.neutron.endpoint_override is None
    assert conf.neutron.default_floating_pool == "nova"
    assert conf.neutron.http_retries == 3
    assert not neutron_conf.configured(conf)  # unset: the pod network, as scripts/serve runs by default


def test_options_read_from_a_file(tmp_path):
    path = tmp_path / "openkeel.conf"
    path.write_text("[DEFAULT]\nvif_plugging_timeout = 30\nvif_plugging_is_fatal = false\n"
                    "[neutron]\nauth_type = password\nauth_url = http://ks/v3\nusername = nova\npassword = p\n"
                    "project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n"
                    "region_name = RegionTwo\nvalid_interfaces = public\n"
                    "endpoint_override = http://neutron:9696\n")
    conf = conf_mod.build_conf(["--config-file", str(path)])
    client_mod.NeutronClient(conf).admin()  # loads the password plugin's options
    assert conf.vif_plugging_timeout == 30 and conf.vif_plugging_is_fatal is False
    assert neutron_conf.configured(conf)
    assert conf.neutron.username == "nova" and conf.neutron.project_name == "service"
    assert conf.neutron.user_domain_name == "Default" and conf.neutron.region_name == "RegionTwo"
    assert conf.neutron.valid_interfaces == ["public"]
    assert conf.neutron.endpoint_override == "http://neutron:9696"


def test_sample_config_lists_neutron_and_vif_options():
    groups = {}
    for group, opts in conf_mod.list_opts():
        name = getattr(group, "name", group)
        groups.setdefault(name, set()).update(o.dest for o in opts)
    assert {"vif_plugging_is_fatal", "vif_plugging_timeout"} <= groups["DEFAULT"]
    assert {"auth_type", "auth_url", "username", "password", "project_name", "user_domain_name",
            "project_domain_name", "region_name", "valid_interfaces", "endpoint_override"} <= groups["neutron"]
    assert "send_service_user_token" in groups["service_user"]


def test_caller_token_is_sent_and_admin_credential_otherwise(neutron):
    client = client_mod.NeutronClient(token_conf(neutron.url))
    net = neutron.network()
    assert [n["id"] for n in client.for_caller(_context()).list_networks(id=[net["id"]])] == [net["id"]]
    assert neutron.requests[-1]["token"] == "demo-token" and neutron.requests[-1]["service_token"] is None
    client.admin().list_networks()
    assert neutron.requests[-1]["token"] == "neutron-admin"
    client.for_caller(_context(token=None)).list_networks()  # noauth2 without a token: [neutron]'s
    assert neutron.requests[-1]["token"] == "neutron-admin"


def test_service_user_token_beside_the_callers(neutron):
    client = client_mod.NeutronClient(token_conf(neutron.url))
    conf = client.conf
    from openkeel_compute.conf import service_user

    service_user.register_opts(conf)
    conf.set_override("send_service_user_token", True, group="service_user")
    conf.set_override("auth_type", "admin_token", group="service_user")
    from keystoneauth1 import loading as ks_loading

    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="service_user")
    conf.set_override("endpoint", neutron.url, group="service_user")
    conf.set_override("token", "service-token", group="service_user")
    client = client_mod.NeutronClient(conf)
    client.for_caller(_context()).list_networks()
    assert neutron.requests[-1]["token"] == "demo-token"
    assert neutron.requests[-1]["service_token"] == "service-token"


def test_errors_as_nova_reports_them(neutron):
    calls = client_mod.NeutronClient(token_conf(neutron.url)).for_caller(_context())
    with pytest.raises(errors.PortNotFound) as caught:
        calls.show_port("8d3c6f2a-0000-4000-8000-000000000001")
    assert caught.value.code == 400
    assert caught.value.message == "Port id 8d3c6f2a-0000-4000-8000-000000000001 could not be found."
    neutron.fail_with = 500
    with pytest.raises(errors.NeutronUnavailable):
        calls.list_networks()


def test_unreachable_neutron_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conf = token_conf(f"http://127.0.0.1:{port}", http_retries=0)
    with pytest.raises(errors.NeutronUnavailable):
        client_mod.NeutronClient(conf).for_caller(_context()).list_networks()
