"""POST /servers/{id}/action rescue and unrescue at the API, on each engine: Nova 34.0.0's checks in its order
(the live servers oracle answered the same refusals: the unknown image, the bad body, the lock, unrescue of
an ACTIVE server, another project's server, an empty adminPass), the volume-backed rule of 2.87, and what
the outbox row asks of the controller."""

from __future__ import annotations

import pytest

from openkeel_compute.compute.instances import instance_sysmeta
from openkeel_compute.db import api as db_api
from openkeel_compute.images import local
from openkeel_compute.model import sysmeta
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import (
    PATH,
    UUID,
    answer_of,
    demo,
    local_image_service,
    outbox_rows,
    row_counts,
    server_row,
    set_server,
)

STABLE = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f50"
HALF = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f52"


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


@pytest.fixture
def images(conf, tmp_path):
    disk = tmp_path / "rescue.raw"
    disk.write_bytes(b"\0" * 4096)
    local.register(tmp_path / "images", disk, name="rescue-stable", image_id=STABLE, copy=True,
                   properties={"hw_rescue_device": "disk", "hw_rescue_bus": "scsi"})
    local.register(tmp_path / "images", disk, name="rescue-half", image_id=HALF, copy=True,
                   properties={"hw_rescue_device": "disk"})
    with local_image_service(conf, tmp_path):
        yield


def _volume_backed(engine):
    with db_api.transaction(engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, UUID, sysmeta.BOOT_FROM_VOLUME, "True")


def _rescue(client, body, version="2.96"):
    return client.post(PATH, headers=demo(version), json_body={"rescue": body})


def test_rescue_writes_the_task_the_action_and_the_controller_row(client, engine, images):
    got = _rescue(client, {"adminPass": "p4ss", "rescue_image_ref": STABLE})
    assert (got.status_code, got.json) == (200, {"adminPass": "p4ss"})
    assert server_row(engine)["task_state"] == "rescuing"
    ((_operation, payload),) = [r for r in outbox_rows(engine) if r[0] == "rescue"]
    assert {k: payload[k] for k in ("image_ref", "password", "stable", "old_vm_state")} == {
        "image_ref": STABLE, "password": "p4ss", "stable": ["disk", "scsi"], "old_vm_state": "active"}


def test_without_an_image_the_server_boots_its_own_legacy_rescue(client, engine, images):
    got = _rescue(client, None)
    assert got.status_code == 200 and len(got.json["adminPass"]) == 12
    ((_op, payload),) = [r for r in outbox_rows(engine) if r[0] == "rescue"]
    assert (payload["image_ref"], payload["stable"]) == (oracle.IMAGE, None)


def test_an_empty_password_is_answered_as_given(client, engine, images):
    # as Nova: the answer carries "", the guest gets a generated password (controller/steps/rescue.py)
    assert (_rescue(client, {"adminPass": ""}).json) == {"adminPass": ""}


@pytest.mark.parametrize("version", ["2.86", "2.87"])
def test_a_volume_backed_server_needs_a_stable_rescue_from_2_87(client, engine, images, version):
    _volume_backed(engine)
    before = row_counts(engine)
    for body in (None, {"rescue_image_ref": HALF}):  # no image, or an image with one property only
        assert answer_of(_rescue(client, body, version)) == (
            400, f"Instance {UUID} cannot be rescued: Cannot rescue a volume-backed instance")
    got = _rescue(client, {"rescue_image_ref": STABLE}, version)
    if version == "2.86":
        assert answer_of(got) == (400, f"Instance {UUID} cannot be rescued: Cannot rescue a volume-backed instance")
        assert row_counts(engine) == before
    else:
        assert got.status_code == 200
        assert server_row(engine)["task_state"] == "rescuing"


def test_refusals_come_in_novas_order_and_write_nothing(client, engine, images):
    before = row_counts(engine)
    unknown = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f5f"
    assert answer_of(_rescue(client, {"rescue_image_ref": unknown})) == (
        400, f"Requested rescue image '{unknown}' is not supported")
    assert answer_of(_rescue(client, {"rescue_image_ref": "nope"})) == (
        400, "Invalid input for field/attribute rescue_image_ref. Value: nope. 'nope' is not a 'uuid'")
    got = client.post(PATH, headers={"X-Auth-Token": "x:other", "X-OpenStack-Nova-API-Version": "2.96"},
                      json_body={"rescue": None})
    assert answer_of(got) == (404, f"Instance {UUID} could not be found.")
    # the state is checked before the image is read
    set_server(engine, vm_state="paused")
    assert answer_of(_rescue(client, {"rescue_image_ref": unknown})) == (
        409, f"Cannot 'rescue' instance {UUID} while it is in vm_state paused")
    assert answer_of(client.post(PATH, headers=demo(), json_body={"unrescue": None})) == (
        409, f"Cannot 'unrescue' instance {UUID} while it is in vm_state paused")
    assert row_counts(engine) == before


def test_unrescue_of_a_rescued_server(client, engine, images):
    set_server(engine, vm_state="rescued")
    got = client.post(PATH, headers=demo(), json_body={"unrescue": None})
    assert (got.status_code, got.text) == (202, "")
    assert server_row(engine)["task_state"] == "unrescuing"
    assert [r[0] for r in outbox_rows(engine)][-1] == "unrescue"
    got = client.post(PATH, headers=demo(), json_body={"unrescue": None})
    assert answer_of(got) == (409, f"Cannot 'unrescue' instance {UUID} while it is in task_state unrescuing")


def test_a_vtpm_server_is_refused_before_its_state(client, engine, images):
    with db_api.transaction(engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, UUID, "image_hw_tpm_version", "2.0")
    set_server(engine, vm_state="paused")  # the vTPM refusal comes first, as Nova's decorator order
    before = row_counts(engine)
    assert answer_of(_rescue(client, None)) == (
        400, f"Operation 'rescue' not supported for vTPM-enabled instance ({UUID}).")
    assert row_counts(engine) == before
