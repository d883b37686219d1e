"""The servers the recorded Nova exchanges show, rebuilt through compute/ so that our API can be
compared with Nova's answers byte for byte (after the recording's host is replaced by ours)."""

from __future__ import annotations

import datetime as dt
import json
import re

import sqlalchemy as sa

from openkeel_compute.catalog import errors as catalog_errors
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import networks
from openkeel_compute.compute.instances import deletion, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states
from tests._shared import shared_path

RECORDED_HOST = "127.0.0.1:19300"
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
SERVER_A = "d75df558-90bc-45c5-bb8b-1a3198e0bf90"
SERVER_LEGACY = "69e1d016-838b-4a50-b2fc-87a160d6a783"
DEMO = Actor("demo", "demo", request_id="req-39906dc7-b92f-47f0-8de9-7abec7ba8fa4")
# the system metadata of a server booted with "networks": "none" (no interface, no security groups)
NO_INTERFACE = {networks.GROUPS_KEY: networks.groups_value(None)}
ADDRESSES = {"private": [{"version": 4, "addr": "192.168.1.31", "OS-EXT-IPS:type": "fixed",
                          "OS-EXT-IPS-MAC:mac_addr": "00:0c:29:0d:11:74"}]}


def exchanges() -> list[dict]:
    return json.loads(shared_path("reference/nova/servers-exchanges.json").read_text())["exchanges"]


def recorded(step: str) -> dict:
    return next(e for e in exchanges() if e["step"] == step)


def as_ours(body, host: str):
    return json.loads(json.dumps(body).replace(RECORDED_HOST, host))


_FRACTION = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d{6}")


def to_the_second(body, engine: str):
    """``body`` with its timestamps cut to whole seconds on MariaDB, whose DATETIME columns keep no
    fraction (Nova's schema on MySQL keeps none either: its API shows whole seconds there too)."""
    if engine != "mariadb":
        return body
    return json.loads(_FRACTION.sub(r"\1", json.dumps(body)))


def _t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.rstrip("Z"))


def _flavor(conn, flavorid: str, name: str, memory_mb: int, public: bool) -> dict:
    try:
        return catalog.get(conn, flavorid)
    except catalog_errors.NotFound:
        catalog.create(conn, name=name, memory_mb=memory_mb, vcpus=1, root_gb=1, flavorid=flavorid, is_public=public)
        return catalog.get(conn, flavorid)


def boot(engine, *, uuid: str, name: str, created: str, updated: str, launched: str, network_info=None,
         reservation_id: str = "r-z5gmhimb", system_metadata=None, actor: Actor = DEMO, host: str = "compute1",
         flavor=("priv-small", "priv.small", 512, False)) -> dict:
    """A server as the oracle's fake driver leaves it: ACTIVE on ``host``."""
    with db_api.transaction(engine) as conn:
        flavor_row = _flavor(conn, *flavor)
        store.create(conn, actor=actor, flavor=flavor_row, extra_specs={}, display_name=name, uuid=uuid,
                     image_ref=IMAGE, reservation_id=reservation_id, config_drive="", kernel_id="",
                     ramdisk_id="", availability_zone="nova", system_metadata=system_metadata)
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(
            vm_state=states.ACTIVE, task_state=None, power_state=states.power_state.RUNNING, host=host,
            node=host, launched_on=host, root_device_name="/dev/sda", progress=0,
            launched_at=dt.datetime.fromisoformat(launched), created_at=_t(created), updated_at=_t(updated),
            network_info=json.dumps(network_info) if network_info is not None else None))
    with db_api.reader(engine) as conn:
        return store.get(conn, uuid)


def boot_server_a(engine) -> dict:
    return boot(engine, uuid=SERVER_A, name="srv-a", created="2026-12-01T09:55:06Z",
                updated="2026-12-01T09:55:08Z", launched="2026-12-01T09:55:08.573206", network_info=ADDRESSES,
                system_metadata={"image_architecture": "x86_64", "image_min_ram": "0", "image_min_disk": "1",
                                 "image_disk_format": "raw", "image_container_format": "bare"})


SERVER_Z = "5eabadee-b64e-432f-9cbf-ac05e0d66b9f"
SERVER_B = "b16b3b35-e250-4a41-af03-a6e877e2f12f"
ADMIN = Actor("admin", "admin", is_admin=True, request_id="req-admin")


def boot_list_scenario(engine) -> None:
    """srv-a and srv-b (project demo), srv-z (project admin), and srv-legacy, deleted: the cloud
    of the recorded list exchanges, in Nova's boot order (so instance names match)."""
    boot_server_a(engine)
    boot(engine, uuid=SERVER_Z, name="srv-z", created="2026-12-01T09:55:08Z", updated="2026-12-01T09:55:10Z",
         launched="2026-12-01T09:55:10.055693", actor=ADMIN, host="compute2", reservation_id="r-u7v7s2y1",
         flavor=("priv-hidden", "priv.hidden", 512, False),
         network_info={"private": [{"version": 4, "addr": "192.168.1.32", "OS-EXT-IPS:type": "fixed",
                                    "OS-EXT-IPS-MAC:mac_addr": "00:d1:9c:5b:da:86"}]})
    boot(engine, uuid=SERVER_LEGACY, name="srv-legacy", created="2026-12-01T09:55:10Z",
         updated="2026-12-01T09:55:11Z", launched="2026-12-01T09:55:11.185680")
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, SERVER_LEGACY)
    boot(engine, uuid=SERVER_B, name="srv-b", created="2026-12-01T09:55:13Z", updated="2026-12-01T09:55:14Z",
         launched="2026-12-01T09:55:14.210100", flavor=("gone", "gone", 768, True),
         network_info={"private": [{"version": 4, "addr": "192.168.1.33", "OS-EXT-IPS:type": "fixed",
                                    "OS-EXT-IPS-MAC:mac_addr": "00:54:a5:5b:0d:02"}]})
