"""Shared helpers of the database tests."""

from __future__ import annotations

import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states


def running_servers(engine, count: int) -> list[str]:
    """``count`` ACTIVE servers of user ``u`` in project ``p`` (flavor m1); their uuids."""
    owner = Actor("u", "p")
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1", memory_mb=64, vcpus=1, root_gb=1, flavorid="m1")
        flavor = catalog.get(conn, "m1")
        uuids = [store.create(conn, actor=owner, flavor=flavor, extra_specs={}, display_name=f"s{i}",
                              image_ref="img", system_metadata={})["uuid"] for i in range(count)]
        conn.execute(sa.update(models.INSTANCES).values(vm_state=states.ACTIVE, task_state=None,
                                                        launched_at=models.utcnow()))
    return uuids
