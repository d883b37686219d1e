"""Shared helpers of the server API tests: a local image service with the test images, row counts, a boot
through the API, and the rows and instance actions of the oracle's server."""

from __future__ import annotations

import contextlib
import threading

import sqlalchemy as sa

from openkeel_compute.compute.instances import instance_actions, instance_faults, store
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.images import glance, local
from tests.api.servers import oracle_state as oracle

IMAGE = oracle.IMAGE


QUEUED = "0c3f7a52-7f43-4a34-9d4e-6c1bb0d6a0a1"


@contextlib.contextmanager
def local_image_service(conf, tmp_path):
    directory = tmp_path / "images"
    directory.mkdir(exist_ok=True)
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    if not (directory / f"{IMAGE}.json").exists():
        local.register(directory, disk, name="fakeimage123456", image_id=IMAGE, copy=True)
        local.register(directory, disk, name="queued", image_id=QUEUED, status="queued", copy=True)
    server = local.serve(str(directory), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    glance.register_opts(conf)
    conf.set_override("api_servers", [f"http://127.0.0.1:{server.server_port}"], group="glance")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def row_counts(engine) -> tuple[int, int, int]:
    with db_api.reader(engine) as conn:
        return tuple(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
                     for t in (models.INSTANCES, models.INSTANCE_ACTIONS, models.OUTBOX))


def boot_server(client, body, version="2.96", token="demo:demo"):
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}
    return client.post("/v2.1/servers", headers=headers, json_body=body)


def server_body(**fields):
    return {"server": {"name": "v1", "imageRef": IMAGE, "flavorRef": "priv-small", "networks": "none", **fields}}


UUID = oracle.SERVER_A


PATH = f"/v2.1/servers/{UUID}/action"


def demo(version: str = "2.96") -> dict:
    return {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": f"compute {version}"}


def server_row(engine):
    with db_api.reader(engine) as conn:
        return store.get(conn, UUID)


def set_server(engine, **values):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == UUID).values(values))


def outbox_rows(engine):
    with db_api.reader(engine) as conn:
        return [(r.operation, r.payload) for r in conn.execute(
            sa.select(models.OUTBOX.c.operation, models.OUTBOX.c.payload)
            .where(models.OUTBOX.c.kind == "server").order_by(models.OUTBOX.c.id))]


def last_action(engine):
    with db_api.reader(engine) as conn:
        latest = instance_actions.actions_of(conn, UUID)[0]
        action = instance_actions.get_action(conn, UUID, latest["request_id"])
    return action["action"], [(e["event"], e["result"], e["details"]) for e in reversed(action["events"])]


def last_fault(engine):
    with db_api.reader(engine) as conn:
        fault = instance_faults.latest_faults(conn, [UUID]).get(UUID)
    return None if fault is None else (fault["code"], fault["message"])


def answer_of(got):
    body = got.json if got.content else None
    if body:
        (only,) = body.values()
        return got.status_code, only.get("message", body)
    return got.status_code, None
