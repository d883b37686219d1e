"""POST /servers/{id}/action resize, confirmResize, revertResize: Nova's refusals and what the API records
(the controller's part: tests/controller/test_server_resize.py). The answers are the live Nova 34.0.0 servers
oracle's to the same requests (a private flavor without access, a deleted one, a second confirm, a second
revert, the instance actions and the os-migrations views per microversion), except the smaller disk, which
the oracle's fake driver resizes and Nova's libvirt driver refuses."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import (
    PATH,
    UUID,
    answer_of,
    demo,
    last_action,
    last_fault,
    outbox_rows,
    server_row,
    set_server,
)
from tests.conftest import admin


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


def _flavor(engine, flavorid: str, *, ram: int = 1024, vcpus: int = 1, disk: int = 1, public: bool = True,
            disabled: bool = False) -> dict:
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=f"f-{flavorid}", memory_mb=ram, vcpus=vcpus, root_gb=disk, flavorid=flavorid,
                       is_public=public)
        if disabled:
            conn.execute(sa.update(models.FLAVORS).where(models.FLAVORS.c.flavorid == flavorid).values(disabled=True))
        return catalog.get(conn, flavorid)


def _migrations(engine) -> list[tuple]:
    with db_api.reader(engine) as conn:
        return [tuple(r) for r in conn.execute(
            sa.select(models.MIGRATIONS.c.status, models.MIGRATIONS.c.migration_type,
                      models.MIGRATIONS.c.old_instance_type_id, models.MIGRATIONS.c.new_instance_type_id)
            .order_by(models.MIGRATIONS.c.id))]


def _resize(client, flavor_ref, headers=None, **extra):
    return client.post(PATH, headers=headers or demo(), json_body={"resize": {"flavorRef": flavor_ref, **extra}})


def test_refusals_in_novas_order_with_novas_messages(client, engine):
    _flavor(engine, "off", disabled=True)
    _flavor(engine, "zero", disk=0)
    _flavor(engine, "tiny-ram", ram=64)
    assert answer_of(_resize(client, "999")) == (400, "Flavor 999 could not be found.")
    assert answer_of(_resize(client, "off")) == (400, "Flavor off could not be found.")
    _flavor(engine, "hidden", public=False)  # a private flavor the caller has no access to
    assert answer_of(_resize(client, "hidden")) == (400, "Flavor hidden could not be found.")
    assert answer_of(_resize(client, "zero")) == (400, ("Server disk was unable to be resized because: Resize to zero "
                                                     "disk flavor is not allowed."))
    # the server's own flavor is private: its project sees it only as an admin here
    assert answer_of(_resize(client, "priv-small")) == (400, "Flavor priv-small could not be found.")
    assert answer_of(_resize(client, "priv-small", admin())) == (400, "When resizing, instances must change flavor!")
    # the image the server was built from against the new flavor
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCE_SYSTEM_METADATA).where(
            models.INSTANCE_SYSTEM_METADATA.c.instance_uuid == UUID,
            models.INSTANCE_SYSTEM_METADATA.c.key == "image_min_ram").values(value="128"))
    assert answer_of(_resize(client, "tiny-ram")) == (400, "Flavor's memory is too small for requested image.")
    # states and the lock
    set_server(engine, task_state="rebooting")
    assert answer_of(_resize(client, "off")) == (409, (f"Cannot 'resize' instance {UUID} while it is in task_state "
                                                    "rebooting"))
    set_server(engine, task_state=None, vm_state="paused")
    assert answer_of(_resize(client, "off")) == (409, f"Cannot 'resize' instance {UUID} while it is in vm_state paused")
    set_server(engine, vm_state="active", locked=True, locked_by="admin")
    assert answer_of(_resize(client, "off")) == (409, f"Instance {UUID} is locked")
    assert outbox_rows(engine) == [] and _migrations(engine) == [] and server_row(engine)["task_state"] is None


def test_the_quota_for_what_grows(client, engine):
    _flavor(engine, "big", ram=4096, vcpus=2)
    got = client.put("/v2.1/os-quota-sets/demo", headers=admin(), json_body={"quota_set": {"ram": 1024}})
    assert got.status_code == 200, got.text
    assert answer_of(_resize(client, "big")) == (403, ("Quota exceeded for ram: Requested 3584, but already used 512 "
                                                    "of 1024 ram"))
    assert _migrations(engine) == [] and server_row(engine)["task_state"] is None


def test_a_resize_is_recorded_as_nova_records_it(client, engine):
    new = _flavor(engine, "bigger", ram=1024, disk=2)
    got = _resize(client, "bigger", **{"OS-DCF:diskConfig": "AUTO"})
    assert (got.status_code, got.content) == (202, b"")
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"], row["progress"], row["auto_disk_config"]) == (
        "active", "resize_prep", 0, True)
    copy = store.flavors_of(row)
    assert (copy.cur["flavorid"], copy.old["flavorid"], copy.new["flavorid"]) == ("priv-small", "priv-small", "bigger")
    assert row["memory_mb"] == 512  # the new sizes only once the resize is done
    (migration,) = _migrations(engine)
    assert migration == ("pre-migrating", "resize", copy.cur["id"], new["id"])
    ((operation, payload),) = outbox_rows(engine)
    assert operation == "resize" and payload["old_vm_state"] == "active"
    assert last_action(engine) == ("resize", [])
    # a second resize, confirm or revert while it runs: 409
    assert answer_of(_resize(client, "bigger")) == (409, (f"Cannot 'resize' instance {UUID} while it is in task_state "
                                                       "resize_prep"))
    got = client.post(PATH, headers=demo(), json_body={"revertResize": None})
    assert answer_of(got) == (409, f"Cannot 'revertResize' instance {UUID} while it is in vm_state active")


@pytest.mark.parametrize("field", ["root_gb", "ephemeral_gb"])
def test_a_smaller_disk_is_accepted_then_fails_as_novas_driver_fails_it(client, engine, field):
    with db_api.transaction(engine) as conn:  # the server on larger disks
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(root_gb=5))
        row = store.get(conn, UUID)
        text = row["flavor"].replace('"root_gb":1', '"root_gb":5').replace('"ephemeral_gb":0', '"ephemeral_gb":3')
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(flavor=text))
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="smaller", memory_mb=1024, vcpus=1, flavorid="smaller",
                       root_gb=2 if field == "root_gb" else 5, ephemeral_gb=3 if field == "root_gb" else 1)
    got = _resize(client, "smaller")
    assert (got.status_code, got.content) == (202, b"")
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"], store.flavors_of(row).cur["root_gb"]) == ("active", None, 5)
    assert last_action(engine) == ("resize", [("conductor_migrate_server", "Success", None),
                                               ("cold_migrate", "Success", None),
                                               ("compute_prep_resize", "Success", None),
                                               ("compute_resize_instance", "Error", "ResizeError")])
    assert last_fault(engine) == (500, "Resize error: Unable to resize disk down.")
    assert [m[0] for m in _migrations(engine)] == ["error"]
    assert outbox_rows(engine) == []


def _finished(engine):
    """The server as the controller leaves a resize: VERIFY_RESIZE with a finished migration."""
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.MIGRATIONS).values(status="finished"))
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(
            vm_state="resized", task_state=None))


def test_confirm_and_revert_need_a_finished_resize(client, engine):
    set_server(engine, vm_state="resized")
    for action in ("confirmResize", "revertResize"):
        got = client.post(PATH, headers=demo(), json_body={action: None})
        assert answer_of(got) == (400, "Instance has not been resized.")
    assert outbox_rows(engine) == []


def test_confirm_once(client, engine):
    _flavor(engine, "bigger", ram=1024)
    assert _resize(client, "bigger").status_code == 202
    _finished(engine)
    got = client.post(PATH, headers=demo(), json_body={"confirmResize": None})
    assert (got.status_code, got.content) == (204, b"")
    assert [m[0] for m in _migrations(engine)] == ["confirming"]
    assert [op for op, _ in outbox_rows(engine)] == ["resize", "confirm-resize"]
    assert last_action(engine) == ("confirmResize", [])
    got = client.post(PATH, headers=demo(), json_body={"confirmResize": None})
    assert answer_of(got) == (400, "Instance has not been resized.")


def test_revert_and_of_concurrent_calls_exactly_one_wins(client, engine):
    _flavor(engine, "bigger", ram=1024)
    assert _resize(client, "bigger").status_code == 202
    _finished(engine)
    answers: list[int] = []

    def call(action):
        answers.append(client.post(PATH, headers=demo(), json_body={action: None}).status_code)

    threads = [threading.Thread(target=call, args=(a,)) for a in ("revertResize", "confirmResize") * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers).count(202) + sorted(answers).count(204) == 1, answers
    assert all(code in (202, 204, 400, 409) for code in answers)
    (status,) = [m[0] for m in _migrations(engine)]
    assert status in ("reverting", "confirming")
    if status == "reverting":
        assert server_row(engine)["task_state"] == "resize_reverting"
        assert last_action(engine) == ("revertResize", [])


_KEYS_21 = ["id", "source_compute", "dest_compute", "source_node", "dest_node", "dest_host", "old_instance_type_id",
            "new_instance_type_id", "instance_uuid", "status", "created_at", "updated_at"]


def test_os_migrations_shows_the_resizes_as_nova_per_microversion(client, engine):
    _flavor(engine, "bigger", ram=1024)
    _flavor(engine, "biggest", ram=2048)
    assert _resize(client, "bigger").status_code == 202
    _finished(engine)
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.MIGRATIONS).values(status="reverted"))
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(vm_state="active"))
    assert _resize(client, "biggest").status_code == 202
    got = client.get("/v2.1/os-migrations", headers=admin("2.1")).json["migrations"]
    assert [list(m) for m in got] == [_KEYS_21] * 2
    assert [m["status"] for m in got] == ["reverted", "pre-migrating"]  # as written
    assert got[0]["created_at"].count(".") == 1 and got[0]["source_compute"] == "compute1"
    got = client.get("/v2.1/os-migrations", headers=admin("2.23")).json["migrations"]
    assert list(got[0]) == [*_KEYS_21[:10], "migration_type", *_KEYS_21[10:]]
    got = client.get("/v2.1/os-migrations", headers=admin("2.80")).json
    keys = [*_KEYS_21[:1], "uuid", *_KEYS_21[1:10], "migration_type", "user_id", "project_id", *_KEYS_21[10:]]
    assert [list(m) for m in got["migrations"]] == [keys] * 2
    assert [m["status"] for m in got["migrations"]] == ["pre-migrating", "reverted"]  # newest first
    page = client.get("/v2.1/os-migrations?limit=1", headers=admin("2.80")).json
    assert [m["status"] for m in page["migrations"]] == ["pre-migrating"]
    assert page["migrations_links"][0]["href"].endswith(f"marker={page['migrations'][0]['uuid']}")
    rest = client.get(f"/v2.1/os-migrations?limit=1&marker={page['migrations'][0]['uuid']}", headers=admin("2.80"))
    assert [m["status"] for m in rest.json["migrations"]] == ["reverted"]
    got = client.get("/v2.1/os-migrations?status=reverted&migration_type=resize", headers=admin("2.80"))
    assert [m["status"] for m in got.json["migrations"]] == ["reverted"]
    # a server's own migrations list shows live migrations in progress only, as Nova's
    assert client.get(f"/v2.1/servers/{UUID}/migrations", headers=admin("2.80")).json == {"migrations": []}
