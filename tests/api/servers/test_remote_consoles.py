"""Remote consoles, the API's half: POST /servers/{id}/remote-consoles, the legacy os-get*Console actions
and GET /os-console-auth-tokens/{token}, answered as Nova 34.0.0's servers API answered the same requests
(recorded from its servers oracle, libvirt's defaults: VNC enabled, serial, SPICE and MKS disabled), and
the tokens as Nova keeps them: only their hash stored, valid until [consoleauth] token_ttl any number of
times, gone with the server. The console proxy's half is tests/consoles/.
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import remote_consoles
from openkeel_compute.compute.instances import deletion
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.servers import oracle_state as oracle
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database

SERVER = oracle.SERVER_A
RC = f"/v2.1/servers/{SERVER}/remote-consoles"
ACTION = f"/v2.1/servers/{SERVER}/action"
NOVNC_URL = re.compile(r"^http://127\.0\.0\.1:6080/vnc_auto\.html\?path=%3Ftoken%3D([0-9a-f-]{36})$")
BARE_400 = ("The server could not comply with the request since it is either malformed or otherwise "
            "incorrect.")


def _demo(version: str) -> dict:
    return {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": f"compute {version}"}


def _admin(version: str) -> dict:
    return {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": f"compute {version}"}


def _bad(message: str) -> tuple[int, dict]:
    return 400, {"badRequest": {"code": 400, "message": message}}


# Recorded from Nova 34.0.0 at 2.99: remote_console body -> (status, answer); None: 200 with a noVNC URL.
NOVA_CREATE = [
    ({"protocol": "vnc", "type": "novnc"}, None),
    ({"protocol": "vnc", "type": "serial"}, _bad("Invalid console type serial")),
    ({"protocol": "vnc", "type": "xvpvnc"}, _bad("Invalid console type xvpvnc")),
    ({"protocol": "serial", "type": "serial"}, _bad("Unavailable console type serial.")),
    ({"protocol": "serial", "type": "novnc"}, _bad("Unavailable console type novnc.")),
    ({"protocol": "spice", "type": "spice-html5"}, _bad("Unavailable console type spice-html5.")),
    ({"protocol": "spice", "type": "spice-direct"}, _bad("Unavailable console type spice-direct.")),
    ({"protocol": "rdp", "type": "rdp-html5"}, _bad(BARE_400)),
    ({"protocol": "mks", "type": "webmks"}, _bad("Unavailable console type webmks.")),
    ({"protocol": "vnc"}, _bad("Invalid input for field/attribute remote_console. Value: {'protocol': 'vnc'}. "
                               "'type' is a required property")),
]
# Recorded from Nova 34.0.0 at 2.5 (at 2.6 every one is the 404 of an action no longer routed).
NOVA_LEGACY = [
    ({"os-getVNCConsole": {"type": "novnc"}}, None),
    ({"os-getVNCConsole": {"type": "xvpvnc"}}, (500, {"computeFault": {"code": 500, "message": (
        "Unexpected API Error. Please contact the administrator\n<class 'nova.exception.ConsoleTypeInvalid'>")}})),
    ({"os-getVNCConsole": {}}, _bad("Invalid input for field/attribute os-getVNCConsole. Value: {}. 'type' is a "
                                    "required property")),
    ({"os-getSerialConsole": {"type": "serial"}}, _bad("Unavailable console type serial.")),
    ({"os-getSPICEConsole": {"type": "spice-html5"}}, _bad("Unavailable console type spice-html5.")),
    ({"os-getRDPConsole": {"type": "rdp-html5"}}, _bad(BARE_400)),
]


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    conf.set_override("enabled", False, group="serial_console")  # Nova's default, which the oracle ran with
    return engine


def _tokens(engine) -> list:
    with db_api.reader(engine) as conn:
        return conn.execute(sa.select(models.CONSOLE_AUTH_TOKENS)).mappings().all()


@pytest.mark.parametrize(("body", "answer"), NOVA_CREATE, ids=[repr(b) for b, _a in NOVA_CREATE])
def test_remote_consoles_answer_as_nova(client, engine, body, answer):
    got = client.post(RC, headers=_demo("2.99"), json_body={"remote_console": body})
    if answer is None:
        assert got.status_code == 200, got.text
        assert got.json["remote_console"]["protocol"] == "vnc" and got.json["remote_console"]["type"] == "novnc"
        assert NOVNC_URL.match(got.json["remote_console"]["url"])
        assert len(_tokens(engine)) == 1
    else:
        assert (got.status_code, got.json) == answer
        assert _tokens(engine) == []


@pytest.mark.parametrize(("body", "answer"), NOVA_LEGACY, ids=[repr(b) for b, _a in NOVA_LEGACY])
def test_legacy_actions_answer_as_nova_until_2_5_and_are_gone_after(client, engine, body, answer):
    got = client.post(ACTION, headers=_demo("2.5"), json_body=body)
    if answer is None:
        assert got.status_code == 200, got.text
        assert NOVNC_URL.match(got.json["console"]["url"]) and got.json["console"]["type"] == "novnc"
    else:
        assert (got.status_code, got.json) == answer
    got = client.post(ACTION, headers=_demo("2.6"), json_body=body)
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "The resource could not be found."}})


def test_versions_schema_and_the_serial_console_when_enabled(client, engine, conf):
    got = client.post(RC, headers=_demo("2.6"), json_body={"remote_console": {"protocol": "mks", "type": "webmks"}})
    assert (got.status_code, got.json) == _bad("Invalid input for field/attribute protocol. Value: mks. 'mks' is "
                                               "not one of ['vnc', 'spice', 'serial', 'rdp']")
    got = client.post(RC, headers=_demo("2.5"), json_body={"remote_console": {"protocol": "vnc", "type": "novnc"}})
    assert got.status_code == 404
    conf.set_override("enabled", True, group="serial_console")
    got = client.post(RC, headers=_demo("2.8"), json_body={"remote_console": {"protocol": "serial",
                                                                                "type": "serial"}})
    assert got.status_code == 200, got.text
    assert re.match(r"^ws://127\.0\.0\.1:6083/\?token=[0-9a-f-]{36}$", got.json["remote_console"]["url"])
    got = client.post(ACTION, headers=_demo("2.1"), json_body={"os-getSerialConsole": {"type": "serial"}})
    assert got.status_code == 200 and got.json["console"]["type"] == "serial"
    conf.set_override("enabled", False, group="vnc")
    got = client.post(RC, headers=_demo("2.8"), json_body={"remote_console": {"protocol": "vnc", "type": "novnc"}})
    assert (got.status_code, got.json) == _bad("Unavailable console type novnc.")


def test_other_projects_readers_and_servers_not_ready(client, engine):
    body = {"remote_console": {"protocol": "vnc", "type": "novnc"}}
    got = client.post(RC, headers={**_demo("2.6"), "X-Auth-Token": "other:other"}, json_body=body)
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": f"Instance {SERVER} could not be found."}})
    got = client.post(RC, headers={**_demo("2.6"), "X-Roles": "reader"}, json_body=body)
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-remote-consoles to be performed.")
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER).values(task_state="deleting"))
    got = client.post(RC, headers=_demo("2.6"), json_body=body)
    assert (got.status_code, got.json) == _bad(
        f"Instance {SERVER} in task_state deleting. Cannot get_vnc_console while the instance is in this state.")
    got = client.post(ACTION, headers=_demo("2.5"), json_body={"os-getVNCConsole": {"type": "novnc"}})
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {"code": 409, "message": (
        f"Cannot 'get_vnc_console' instance {SERVER} while it is in task_state deleting")}})
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER).values(host=None))
    got = client.post(RC, headers=_demo("2.6"), json_body={"remote_console": {"protocol": "spice",
                                                                                "type": "spice-html5"}})
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {
        "code": 409, "message": f"Instance {SERVER} is not ready"}})
    assert _tokens(engine) == []


def _token_of(url: str) -> str:
    match = NOVNC_URL.match(url)
    assert match, url
    return match.group(1)


def test_console_auth_tokens_as_nova(client, engine):
    url = client.post(RC, headers=_demo("2.6"), json_body={"remote_console": {"protocol": "vnc",
                                                                                "type": "novnc"}}).json
    token = _token_of(url["remote_console"]["url"])
    path = f"/v2.1/os-console-auth-tokens/{token}"
    expected = {"console": {"instance_uuid": SERVER, "host": "compute1", "port": 5900, "internal_access_path": None}}
    for _ in range(2):  # valid any number of times until it expires, as Nova's
        got = client.get(path, headers=_admin("2.31"))
        assert (got.status_code, got.json) == (200, expected)
    assert client.get(path + "?x=1", headers=_admin("2.98")).status_code == 200
    got = client.get(path + "?x=1", headers=_admin("2.99"))
    assert (got.status_code, got.json) == _bad("Additional properties are not allowed ('x' was unexpected)")
    for headers in (_admin("2.30"), _demo("2.30"), _admin("2.1")):
        assert (client.get(path, headers=headers).status_code, client.get(path, headers=headers).json) == \
            _bad(BARE_400)
    got = client.get(path, headers=_demo("2.31"))
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-console-auth-tokens to be performed.")
    got = client.get("/v2.1/os-console-auth-tokens/nope", headers=_admin("2.31"))
    assert (got.status_code, got.json) == (404, {"itemNotFound": {"code": 404, "message": "Token not found"}})
    # only the hash is kept
    (row,) = _tokens(engine)
    assert row["token_hash"] == remote_consoles.token_hash(token) and token not in str(dict(row))


def test_tokens_expire_and_go_with_their_server(client, engine, conf):
    conf.set_override("token_ttl", 0, group="consoleauth")
    expired = _token_of(client.post(RC, headers=_demo("2.6"), json_body={"remote_console": {
        "protocol": "vnc", "type": "novnc"}}).json["remote_console"]["url"])
    assert client.get(f"/v2.1/os-console-auth-tokens/{expired}", headers=_admin("2.31")).status_code == 404
    conf.set_override("token_ttl", 600, group="consoleauth")
    token = _token_of(client.post(RC, headers=_demo("2.6"), json_body={"remote_console": {
        "protocol": "vnc", "type": "novnc"}}).json["remote_console"]["url"])
    assert client.get(f"/v2.1/os-console-auth-tokens/{token}", headers=_admin("2.31")).status_code == 200
    assert client.delete(f"/v2.1/servers/{SERVER}", headers=_demo("2.6")).status_code == 204
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, SERVER)
    got = client.get(f"/v2.1/os-console-auth-tokens/{token}", headers=_admin("2.31"))
    assert (got.status_code, got.json) == (404, {"itemNotFound": {"code": 404, "message": "Token not found"}})
    assert _tokens(engine) == []


@pytest.mark.parametrize("engine_name", ENGINES)
def test_authorise_validate_and_forget_on_every_engine(engine_name, tmp_path):
    with throwaway_database(engine_name, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        oracle.boot_server_a(engine)
        settings = remote_consoles.Settings.from_conf(conf)
        with db_api.transaction(engine) as conn:
            row = conn.execute(sa.select(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER)).mappings().one()
            vnc = remote_consoles.authorize(conn, dict(row), "vnc", "novnc", settings, now=1000)
            serial = remote_consoles.authorize(conn, dict(row), "serial", "serial", settings, now=1000)
        vnc_token = _token_of(vnc)
        serial_token = serial.rsplit("=", 1)[1]
        with db_api.reader(engine) as conn:
            assert remote_consoles.validate(conn, vnc_token, now=1599).console_type == "novnc"
            assert remote_consoles.validate(conn, serial_token, now=1000).console_type == "serial"
            assert remote_consoles.validate(conn, vnc_token, now=1600) is None
            assert remote_consoles.validate(conn, "forged", now=1000) is None
        with db_api.transaction(engine) as conn:
            assert remote_consoles.clean_expired(conn, now=1600) == 2
        assert _tokens(engine) == []
        db_api.dispose_all()
