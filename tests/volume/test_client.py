"""[cinder] and [DEFAULT] max_local_block_devices as Nova's, and the Cinder client over keystoneauth:
who each call is made as (the caller's token, the [service_user] token beside it, the [cinder]
credential), where Cinder is (endpoint_template, or the catalog as catalog_info says), the
microversions sent, the attachments flow and how Cinder's answers become Nova's errors."""

from __future__ import annotations

import json
import socket
import types

import pytest

from openkeel_compute import conf as conf_mod
from openkeel_compute.conf import cinder as cinder_conf
from openkeel_compute.volume import client as client_mod
from openkeel_compute.volume import errors

SERVER = "5d3c6f2a-0000-4000-8000-0000000000aa"


def _conf(**cinder):
    conf = conf_mod.build_conf()
    cinder_conf.register_cinder_opts(conf)  # as the code that reads [cinder] does
    for name, value in cinder.items():
        conf.set_override(name, value, group="cinder")
    return conf


def token_conf(url: str, token: str = "cinder-admin", **cinder):
    """[cinder] with keystoneauth's admin_token plugin (a fixed token) and Cinder at ``url``/v3."""
    from keystoneauth1 import loading as ks_loading

    conf = _conf(auth_type="admin_token", endpoint_template=url + "/v3/%(project_id)s", **cinder)
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="cinder")
    conf.set_override("endpoint", url, group="cinder")
    conf.set_override("token", token, group="cinder")
    return conf


def _context(token="demo-token", project="demo", environ=None):
    return types.SimpleNamespace(auth_token=token, project_id=project, user_id="u", is_admin=False,
                                 environ=environ or {})


def test_options_have_novas_names_and_defaults():
    conf = conf_mod.build_conf()
    assert "cinder" not in conf  # registered at its first use: a worker that never meets Cinder skips keystoneauth
    assert conf.max_local_block_devices == 3
    assert not cinder_conf.configured(conf)  # unset: servers boot from images only
    assert conf.cinder.catalog_info == "volumev3::publicURL"
    assert conf.cinder.endpoint_template is None and conf.cinder.os_region_name is None
    assert conf.cinder.http_retries == 3 and conf.cinder.cross_az_attach is True and conf.cinder.debug is False
    assert conf.cinder.auth_type is None


def test_options_read_from_a_file(tmp_path):
    path = tmp_path / "openkeel.conf"
    path.write_text("[DEFAULT]\nmax_local_block_devices = 0\n"
                    "[cinder]\nauth_type = password\nauth_url = http://ks/v3\nusername = nova\npassword = p\n"
                    "project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n"
                    "catalog_info = block-storage:cinderv3:internalURL\nos_region_name = RegionTwo\n"
                    "cross_az_attach = false\nhttp_retries = 0\n")
    conf = conf_mod.build_conf(["--config-file", str(path)])
    client_mod.CinderClient(conf).admin()  # loads the password plugin's options
    assert conf.max_local_block_devices == 0
    assert cinder_conf.configured(conf)
    assert conf.cinder.username == "nova" and conf.cinder.project_name == "service"
    assert conf.cinder.catalog_info == "block-storage:cinderv3:internalURL"
    assert conf.cinder.os_region_name == "RegionTwo" and conf.cinder.cross_az_attach is False
    assert conf.cinder.http_retries == 0


def test_catalog_info_is_checked_as_novas():
    conf = _conf()
    with pytest.raises(ValueError):
        conf.set_override("catalog_info", "volumev3", group="cinder")


def test_sample_config_lists_cinder_options():
    groups: dict[str, set] = {}
    for group, opts in conf_mod.list_opts():
        name = getattr(group, "name", group)
        groups.setdefault(name, set()).update(o.dest for o in opts)
    assert "max_local_block_devices" in groups["DEFAULT"]
    assert {"catalog_info", "endpoint_template", "os_region_name", "http_retries", "cross_az_attach", "debug",
            "auth_type", "auth_url", "username", "password", "project_name", "cafile", "timeout"} <= groups["cinder"]


def test_caller_token_is_sent_and_admin_credential_otherwise(cinder):
    client = client_mod.CinderClient(token_conf(cinder.url))
    vol = cinder.volume()
    assert client.for_caller(_context()).get_volume(vol["id"])["id"] == vol["id"]
    last = cinder.requests[-1]
    assert (last["token"], last["service_token"]) == ("demo-token", None)
    assert last["path"] == f"/v3/demo/volumes/{vol['id']}"  # endpoint_template filled with the caller's project
    assert last["version"] == "volume 3.48"
    client.admin().get_volume(vol["id"])
    assert cinder.requests[-1]["token"] == "cinder-admin"
    client.for_caller(_context(token=None)).get_volume(vol["id"])  # noauth2 without a token: [cinder]'s
    assert cinder.requests[-1]["token"] == "cinder-admin"


def test_catalog_lookup_as_catalog_info_says(cinder):
    """Without endpoint_template, the caller's catalog: the service type and interface of catalog_info,
    in os_region_name."""
    conf = _conf(catalog_info="volumev3::internalURL", os_region_name="RegionTwo")
    catalog = [{"type": "volumev3", "name": "cinderv3", "endpoints": [
        {"region": "RegionOne", "internalURL": "http://wrong.invalid/v3/demo", "publicURL": "http://wrong.invalid"},
        {"region": "RegionTwo", "internalURL": cinder.url + "/v3/demo", "publicURL": "http://wrong.invalid"}]}]
    environ = {"HTTP_X_SERVICE_CATALOG": json.dumps(catalog)}
    vol = cinder.volume()
    calls = client_mod.CinderClient(conf).for_caller(_context(environ=environ), environ)
    assert calls.get_volume(vol["id"])["id"] == vol["id"]
    assert cinder.requests[-1]["path"] == f"/v3/demo/volumes/{vol['id']}"
    no_volume = [{"type": "compute", "endpoints": [{"region": "RegionTwo", "internalURL": "http://x.invalid"}]}]
    environ = {"HTTP_X_SERVICE_CATALOG": json.dumps(no_volume)}
    with pytest.raises(errors.CinderUnavailable):
        client_mod.CinderClient(conf).for_caller(_context(environ=environ), environ).get_volume(vol["id"])


def _with_service_user(conf, url):
    from keystoneauth1 import loading as ks_loading

    from openkeel_compute.conf import service_user

    service_user.register_opts(conf)
    conf.set_override("send_service_user_token", True, group="service_user")
    conf.set_override("auth_type", "admin_token", group="service_user")
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="service_user")
    conf.set_override("endpoint", url, group="service_user")
    conf.set_override("token", "service-token", group="service_user")
    return conf


def test_service_user_token_beside_the_callers_and_the_admins(cinder):
    """As Nova sends them: Cinder then trusts an attachment delete without asking the compute API back."""
    client = client_mod.CinderClient(_with_service_user(token_conf(cinder.url), cinder.url))
    vol = cinder.volume()
    client.for_caller(_context()).get_volume(vol["id"])
    assert (cinder.requests[-1]["token"], cinder.requests[-1]["service_token"]) == ("demo-token", "service-token")
    attachment = client.admin().attachment_create(vol["id"], SERVER)
    client.admin().attachment_delete(attachment["id"])
    assert (cinder.requests[-1]["token"], cinder.requests[-1]["service_token"]) == ("cinder-admin", "service-token")


def test_attachment_flow_at_344(cinder):
    calls = client_mod.CinderClient(token_conf(cinder.url)).admin()
    vol = cinder.volume()
    attachment = calls.attachment_create(vol["id"], SERVER)
    assert cinder.volumes[vol["id"]]["status"] == "reserved" and attachment["status"] == "reserved"
    assert cinder.requests[-1]["body"] == {"attachment": {"volume_uuid": vol["id"], "instance_uuid": SERVER}}
    connector = {"host": "node-1", "platform": "x86_64", "os_type": "linux", "multipath": False}
    updated = calls.attachment_update(attachment["id"], connector, mountpoint="/dev/vdb")
    # Cinder answers connection_info flat; it is read nested under "data", as Nova's _translate_attachment_ref
    assert "export" in cinder.attachments[attachment["id"]]["connection_info"]
    info = updated["connection_info"]
    assert info["driver_volume_type"] == "nfs" and info["status"] == "attaching" and info["instance"] == SERVER
    assert info["data"] == {"export": "127.0.0.1:/srv/okc-nfs", "name": f"volume-{vol['id']}", "format": "raw",
                            "options": None, "access_mode": "rw", "mount_point_base": "/var/lib/cinder/mnt"}
    assert updated["status"] == "attaching" and updated["attach_mode"] == "rw"
    assert cinder.requests[-1]["body"] == {"attachment": {"connector": dict(connector, mountpoint="/dev/vdb")}}
    assert calls.attachment_get(attachment["id"])["connection_info"] == info
    calls.attachment_complete(attachment["id"])
    assert cinder.volumes[vol["id"]]["status"] == "in-use"
    assert calls.attachment_get(attachment["id"])["status"] == "attached"
    calls.attachment_delete(attachment["id"])
    assert cinder.volumes[vol["id"]]["status"] == "available"
    calls.attachment_delete(attachment["id"])  # already gone: not an error
    assert {r["version"] for r in cinder.requests} == {"volume 3.44"}
    with pytest.raises(errors.AttachmentNotFound) as caught:
        calls.attachment_get(attachment["id"])
    assert caught.value.message == f"Volume attachment {attachment['id']} could not be found."


def test_errors_as_nova_reports_them(cinder):
    calls = client_mod.CinderClient(token_conf(cinder.url)).for_caller(_context())
    missing = "8d3c6f2a-0000-4000-8000-000000000001"
    with pytest.raises(errors.VolumeNotFound) as caught:
        calls.get_volume(missing)
    assert caught.value.message == f"Volume {missing} could not be found." and caught.value.code == 404
    with pytest.raises(errors.SnapshotNotFound) as snap:
        calls.get_snapshot(missing)
    assert snap.value.message == f"Snapshot {missing} could not be found."
    vol = cinder.volume(status="in-use")
    with pytest.raises(errors.InvalidInput) as invalid:
        calls.attachment_create(vol["id"], SERVER)
    assert invalid.value.message == (
        f"Invalid input received: Invalid volume: Volume {vol['id']} status must be available or downloading to "
        f"reserve, but the current status is in-use. (HTTP 400) (Request-ID: req-fake)")
    cinder.fail_with = 500
    with pytest.raises(errors.CinderUnavailable):
        calls.get_volume(vol["id"])


def test_unreachable_cinder_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conf = token_conf(f"http://127.0.0.1:{port}", http_retries=0)
    with pytest.raises(errors.CinderUnavailable) as caught:
        client_mod.CinderClient(conf).for_caller(_context()).get_volume(SERVER)
    assert caught.value.message.startswith("Connection to cinder host failed: ")
