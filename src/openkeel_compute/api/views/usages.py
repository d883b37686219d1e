"""Usage of servers over a period (os-simple-tenant-usage), computed as Nova 34.0.0 computes it.

A server is charged from the later of its launch and the period's start to the earlier of its
termination and the period's end, in hours; its flavor's disk (root + ephemeral), vCPUs and memory
are multiplied by those hours into its project's totals. Servers deleted during the period count
until they were deleted ("terminated"); a server never launched is not charged.
"""

from __future__ import annotations

import datetime as dt
import json

from openkeel_compute.compute import flavor_copy

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"  # how Nova's JSON serialiser writes a datetime


def hours_for(launched_at: dt.datetime | None, terminated_at: dt.datetime | None, start: dt.datetime,
              stop: dt.datetime) -> float | int:
    """Hours of the period the server ran (an int 0 when none, as Nova returns it)."""
    if terminated_at and terminated_at < start:
        return 0
    if launched_at and launched_at > stop:
        return 0
    if not launched_at:
        return 0
    begin = max(launched_at, start)
    end = min(stop, terminated_at) if terminated_at else stop
    return (end - begin).total_seconds() / 3600.0


def server_usage(row: dict, start: dt.datetime, stop: dt.datetime, now: dt.datetime) -> dict:
    """One server's line (Nova's key order), from its instances row."""
    flavor = flavor_copy.FlavorCopy.loads(row["flavor"]).cur if row.get("flavor") else None
    launched, terminated = row["launched_at"], row["terminated_at"]
    info = {
        "hours": hours_for(launched, terminated, start, stop),
        "flavor": flavor["name"] if flavor else "",
        "instance_id": row["uuid"],
        "name": row["display_name"],
        "tenant_id": row["project_id"],
        "memory_mb": flavor["memory_mb"] if flavor else row["memory_mb"],
        "local_gb": (flavor["root_gb"] + flavor["ephemeral_gb"]) if flavor else row["root_gb"] + row["ephemeral_gb"],
        "vcpus": flavor["vcpus"] if flavor else row["vcpus"],
        "started_at": launched,
        "ended_at": terminated,
        "state": "terminated" if terminated else row["vm_state"],
        "uptime": int(((terminated if terminated else now) - launched).total_seconds()),
    }
    return info


def tenant_usages(rows: list[dict], start: dt.datetime, stop: dt.datetime, *, detailed: bool,
                  now: dt.datetime) -> tuple[list[dict], list[dict]]:
    """(one summary per project in the rows' order, every server's line)."""
    summaries: dict[str, dict] = {}
    lines = []
    for row in rows:
        info = server_usage(row, start, stop, now)
        summary = summaries.get(info["tenant_id"])
        if summary is None:
            summary = summaries[info["tenant_id"]] = {"tenant_id": info["tenant_id"]}
            if detailed:
                summary["server_usages"] = []
            summary.update(total_local_gb_usage=0, total_vcpus_usage=0, total_memory_mb_usage=0, total_hours=0,
                           start=start, stop=stop)
        summary["total_local_gb_usage"] += info["local_gb"] * info["hours"]
        summary["total_vcpus_usage"] += info["vcpus"] * info["hours"]
        summary["total_memory_mb_usage"] += info["memory_mb"] * info["hours"]
        summary["total_hours"] += info["hours"]
        lines.append(info)
        if detailed:
            summary["server_usages"].append(info)
    return list(summaries.values()), lines


def _default(value):
    if isinstance(value, dt.datetime):
        return value.strftime(TIME_FORMAT)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(body: dict) -> bytes:
    """The body as Nova writes it: times in its format, hours and totals as Python writes floats
    (orjson writes 1.5e-05 as 0.000015: the same number, other digits)."""
    return json.dumps(body, default=_default, separators=(",", ":"), ensure_ascii=False).encode()
