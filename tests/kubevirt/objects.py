"""Shared helpers of the mapping's tests: KubeVirt objects as a cluster shows a server's (for
kubevirt/vmstatus.py), and the rows a server's composition starts from (for kubevirt/server.py).

Test modules import these, never each other.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from openkeel_compute.compute.flavor_copy import primitive
from openkeel_compute.kubevirt.vmstatus import Observation, observe

# -- a server's objects, for the observation -------------------------------------------------------------

UUID = "1b4c2a3e-0000-4000-8000-00000000abcd"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
LAUNCHED = NOW - dt.timedelta(hours=1)


def cond(kind, status, reason=None, message=None):
    c = {"type": kind, "status": status}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def vm(*conditions, deleting=False):
    meta = {"name": UUID}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    return {"metadata": meta, "status": {"conditions": list(conditions)}}


def vmi(phase, *conditions, reason=None, uid="uid-1", node="node-a", interfaces=None):
    status = {"phase": phase, "conditions": list(conditions), "nodeName": node}
    if reason:
        status["reason"] = reason
    if interfaces is not None:
        status["interfaces"] = interfaces
    return {"metadata": {"name": UUID, "uid": uid}, "status": status}


def dv(phase, progress=None, *conditions, restarts=0):
    status = {"phase": phase, "conditions": list(conditions), "restartCount": restarts}
    if progress is not None:
        status["progress"] = progress
    return {"metadata": {"name": f"{UUID}-root"}, "status": status}


def server(vm_state, task=None, launched=True, **extra):
    return {"uuid": UUID, "vm_state": vm_state, "task_state": task,
            "launched_at": LAUNCHED if launched else None, **extra}


def run(row_server, the_vm, the_vmi, dvs=(), started=NOW - dt.timedelta(seconds=30),
        timeout=3600) -> Observation:
    return observe(row_server, the_vm, the_vmi, list(dvs), NOW, started, timeout)


UNSCHEDULABLE = cond("PodScheduled", "False", "Unschedulable", "0/3 nodes are available: 3 Insufficient memory.")
IMPORTING = dv("ImportInProgress", "45.50%", cond("Running", "True"))


# -- a server's rows, for its composition -----------------------------------------------------------------

SERVER_UUID = "1B4C2A3E-0000-4000-8000-00000000ABCD"
PROJECT = "6f70656e6b65656c6f70656e6b656565"
SERVER = {"uuid": SERVER_UUID, "project_id": PROJECT, "hostname": "web-1", "display_name": "Web 1",
          "user_data": None, "config_drive": "", "metadata": {"role": "web"}}
IMAGE = {"id": "70a599e0-31e7-49b7-b260-868f441e862b", "name": "cirros", "size": 21430272,
         "virtual_size": 117440512, "min_ram": 0, "min_disk": 0, "properties": {}}


def flavor_copy(**changes: Any) -> dict[str, Any]:
    """A frozen flavor copy entry (m1.small unless ``changes`` say otherwise; ``extra_specs`` apart)."""
    row = {"id": 7, "name": "m1.small", "memory_mb": 2048, "vcpus": 2, "root_gb": 20, "ephemeral_gb": 0,
           "flavorid": "2", "swap": 0, "rxtx_factor": 1.0, "vcpu_weight": None, "disabled": False, "is_public": True}
    specs = changes.pop("extra_specs", {})
    row.update(changes)
    return primitive(row, specs)["nova_object.data"]
