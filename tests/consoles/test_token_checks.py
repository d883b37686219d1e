"""The console proxy's checks of a websocket (consoles/proxy.py ``check``), on SQLite, PostgreSQL and MariaDB:
a token replayed works until it expires (as Nova's database tokens), and is refused with Nova's message once
expired, forged, its server deleted or moved to another node; a foreign Origin is refused."""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import remote_consoles
from openkeel_compute.compute.instances import deletion
from openkeel_compute.consoles import proxy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.servers import oracle_state as oracle
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database

SERVER = oracle.SERVER_A
HOST = {"Host": "console.example:6080"}


def _authorise(engine, settings, console=("vnc", "novnc"), now=None) -> str:
    with db_api.transaction(engine) as conn:
        row = conn.execute(sa.select(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER)).mappings().one()
        url = remote_consoles.authorize(conn, dict(row), *console, settings, now=now)
    return re.search(r"token(?:=|%3D)([0-9a-f-]{36})$", url).group(1)


def _set(engine, **values):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER).values(values))


@pytest.mark.parametrize("engine_name", ENGINES)
def test_tokens_at_the_proxy(engine_name, tmp_path):
    with throwaway_database(engine_name, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        oracle.boot_server_a(engine)
        _set(engine, namespace="openkeel-demo", vm_name="srv-a")
        settings = remote_consoles.Settings.from_conf(conf)
        token = _authorise(engine, settings)
        serial = _authorise(engine, settings, ("serial", "serial"))
        for _ in range(2):  # replayed: still good until it expires
            assert proxy.check(engine, token, HOST) == {"namespace": "openkeel-demo", "vm_name": "srv-a",
                                                         "instance_uuid": SERVER, "subresource": "vnc"}
        assert proxy.check(engine, serial, HOST)["subresource"] == "console"
        # Nova's serial console takes any type: a serial console still, whatever its URL looks like
        odd = _authorise(engine, settings, ("serial", "novnc"))
        assert proxy.check(engine, odd, HOST)["subresource"] == "console"
        assert proxy.check(engine, token, {**HOST, "Origin": "https://console.example"})["vm_name"] == "srv-a"
        assert proxy.check(engine, token, {**HOST, "Origin": "http://portal.example"},
                           allowed_origins=("portal.example",))["vm_name"] == "srv-a"
        refusals = [
            (None, HOST, proxy.INVALID_TOKEN),
            ("forged", HOST, proxy.INVALID_TOKEN),
            (token.upper(), HOST, proxy.INVALID_TOKEN),
            (token, {**HOST, "Origin": "http://evil.example"}, "Origin header does not match this host."),
            (token, {**HOST, "Origin": "evil"}, "Origin header not valid."),
        ]
        for candidate, headers, message in refusals:
            with pytest.raises(proxy.Refused) as refused:
                proxy.check(engine, candidate, headers)
            assert str(refused.value) == message
        expired = _authorise(engine, settings, now=time.time() - settings.ttl - 1)
        with pytest.raises(proxy.Refused, match=r"invalid or has expired"):
            proxy.check(engine, expired, HOST)
        _set(engine, node="another-node")  # the server moved: its old tokens name the old node
        with pytest.raises(proxy.Refused, match=r"invalid or has expired"):
            proxy.check(engine, token, HOST)
        _set(engine, node="compute1")
        assert proxy.check(engine, token, HOST)["vm_name"] == "srv-a"
        with db_api.transaction(engine) as conn:
            deletion.soft_delete(conn, SERVER)
        with pytest.raises(proxy.Refused, match=r"invalid or has expired"):
            proxy.check(engine, token, HOST)
        with db_api.reader(engine) as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(models.CONSOLE_AUTH_TOKENS)).scalar() == 0
        db_api.dispose_all()


def test_the_token_comes_from_the_query_or_novncs_cookie():
    assert proxy.token_of("/?token=abc", None) == "abc"
    assert proxy.token_of("/websockify", "other=1; token=xyz") == "xyz"
    assert proxy.token_of("/", "garbage;;=") is None
    assert proxy.token_of("/", None) is None
