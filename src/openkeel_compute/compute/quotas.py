"""Quotas as Nova's database driver keeps them: limits, usages, checks and Nova's over-quota answers.

A project's limit for a resource is its own row (``quotas``), else the ``default`` quota class's
row, else the ``[quota]`` option. A user's limit is its own row (``project_user_quotas``), else the
project's. Usages are counted, never stored: instances, cores and ram from the project's live
instances (or, with ``[quota] count_usage_from_placement``, cores and ram from what holds an
allocation), key pairs per user. Checks run inside the writing transaction after
``lock_project()``, so concurrent writers of one project are serialised and never pass a limit
together.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from openkeel_compute import errors
from openkeel_compute.compute import server_groups
from openkeel_compute.db import models

# Nova's resources, in Nova's order (the order of quota_set bodies).
RESOURCES = (
    "cores", "injected_files", "injected_file_content_bytes", "injected_file_path_bytes", "instances",
    "key_pairs", "metadata_items", "ram", "server_groups", "server_group_members",
    "fixed_ips", "floating_ips", "security_groups", "security_group_rules",
)
# The nova-network resources: always unlimited, hidden from 2.36; the injected-file ones from 2.57.
NETWORK_RESOURCES = ("fixed_ips", "floating_ips", "security_group_rules", "security_groups")
FILTERED_V236 = NETWORK_RESOURCES
FILTERED_V257 = NETWORK_RESOURCES + ("injected_files", "injected_file_content_bytes", "injected_file_path_bytes")
COUNTABLE = ("cores", "instances", "key_pairs", "ram", "server_groups", "server_group_members")
# Resources a per-user limit applies to (Nova keeps server_groups per project only).
PER_PROJECT = ("server_groups",)
_OPTION = {"injected_file_path_bytes": "injected_file_path_length"}
DEFAULT_CLASS = "default"
UNLIMITED = -1

QUOTAS = models.QUOTAS
USER_QUOTAS = models.PROJECT_USER_QUOTAS
CLASSES = models.QUOTA_CLASSES
INSTANCES = models.INSTANCES


class OverQuota(errors.Forbidden):
    """Nova's OverQuota family: answered 403 with the message."""


def _noop(conf) -> bool:
    return conf.quota.driver == "nova.quota.NoopQuotaDriver"


def option_default(conf, resource: str) -> int:
    if resource in NETWORK_RESOURCES:
        return UNLIMITED
    return getattr(conf.quota, _OPTION.get(resource, resource))


def _rows(conn, table, *where) -> dict[str, int]:
    return {r.resource: r.hard_limit for r in conn.execute(select(table.c.resource, table.c.hard_limit).where(*where))}


def class_limits(conn, conf, class_name: str) -> dict[str, int]:
    if _noop(conf):
        return dict.fromkeys(RESOURCES, UNLIMITED)
    rows = _rows(conn, CLASSES, CLASSES.c.class_name == class_name)
    return {r: rows.get(r, option_default(conf, r)) for r in RESOURCES}


def defaults(conn, conf) -> dict[str, int]:
    return class_limits(conn, conf, DEFAULT_CLASS)


def project_rows(conn, project_id: str) -> dict[str, int]:
    return _rows(conn, QUOTAS, QUOTAS.c.project_id == project_id)


def user_rows(conn, project_id: str, user_id: str) -> dict[str, int]:
    return _rows(conn, USER_QUOTAS, and_(USER_QUOTAS.c.project_id == project_id, USER_QUOTAS.c.user_id == user_id))


def _placement_usages(conf, project_id: str, user_id: str | None) -> dict[str, int]:
    """cores (VCPU + PCPU) and ram (MEMORY_MB) the project (or its user) holds in Placement, as Nova counts
    them with ``count_usage_from_placement``."""
    from openkeel_compute.placement.errors import PlacementError

    try:
        usages = _placement_client(conf).usages(project_id, user_id)
    except PlacementError as exc:
        # Nova's API answers its generic 500 naming what its report client raised: the keystoneauth
        # error when Placement gave no answer, its own UsagesRetrievalFailed when it answered an error.
        exc.nova_exception_class = (  # type: ignore[attr-defined]  # read by the API's fault mapping
            getattr(exc, "transport", None) or "nova.exception.UsagesRetrievalFailed")
        raise
    return {"cores": usages.get("VCPU", 0) + usages.get("PCPU", 0), "ram": usages.get("MEMORY_MB", 0)}


_CLIENTS: dict[int, object] = {}


def _placement_client(conf):
    """One Placement client per configuration (built on first use: the API imports keystoneauth only then)."""
    client = _CLIENTS.get(id(conf))
    if client is None:
        from openkeel_compute.placement.client import PlacementClient

        client = _CLIENTS[id(conf)] = PlacementClient.from_conf(conf)
    return client


def placement_usages(conf, project_id: str, user_id: str | None = None) -> dict[str, int] | None:
    """Placement's counts when ``[placement]`` is configured, else None (the database counts instead)."""
    from openkeel_compute.placement.client import configured

    return _placement_usages(conf, project_id, user_id) if configured(conf) else None


def counts(conn, conf, project_id: str, user_id: str | None = None) -> dict[str, int]:
    """In-use counts of the countable resources (project-wide, or the user's when ``user_id``)."""
    live = and_(INSTANCES.c.project_id == project_id, INSTANCES.c.deleted == 0,
                INSTANCES.c.vm_state != "soft-delete")
    if user_id is not None:
        live = and_(live, INSTANCES.c.user_id == user_id)
    row = conn.execute(select(func.count(), func.coalesce(func.sum(INSTANCES.c.vcpus), 0),
                              func.coalesce(func.sum(INSTANCES.c.memory_mb), 0)).where(live)).one()
    used = {"instances": int(row[0]), "cores": int(row[1]), "ram": int(row[2])}
    from_placement = placement_usages(conf, project_id, user_id) if conf.quota.count_usage_from_placement else None
    if from_placement is not None:
        used.update(from_placement)
    elif conf.quota.count_usage_from_placement:
        # No [placement]: what would hold an allocation, from the database (not offloaded, and not a server
        # that failed before it got a node).
        held = and_(live, INSTANCES.c.vm_state != "shelved_offloaded",
                    ~and_(INSTANCES.c.vm_state == "error", INSTANCES.c.node.is_(None)))
        row = conn.execute(select(func.coalesce(func.sum(INSTANCES.c.vcpus), 0),
                                  func.coalesce(func.sum(INSTANCES.c.memory_mb), 0)).where(held)).one()
        used.update(cores=int(row[0]), ram=int(row[1]))
    used.update(server_groups=server_groups.count(conn, project_id, user_id), server_group_members=0, key_pairs=0)
    return used


def _limits(conn, conf, project_rows_: dict, usages: dict | None, remains_of: dict | None = None) -> dict:
    default = defaults(conn, conf)
    result = {}
    for resource in RESOURCES:
        limit = UNLIMITED if _noop(conf) else project_rows_.get(resource, default[resource])
        entry = {"limit": limit}
        if usages is not None:
            entry["in_use"] = UNLIMITED if _noop(conf) else usages.get(resource, 0)
        if remains_of is not None:
            entry["remains"] = limit
        result[resource] = entry
    if remains_of is not None and not _noop(conf):
        for resource, hard_limit in remains_of.items():
            if resource in result:
                result[resource]["remains"] -= hard_limit
    return result


def project_quotas(conn, conf, project_id: str, *, usages: bool = False, remains: bool = False) -> dict:
    used = counts(conn, conf, project_id) if usages else None
    user_sums: dict[str, Any] | None = None
    if remains:
        user_sums = {}
        for r in conn.execute(select(USER_QUOTAS.c.resource, USER_QUOTAS.c.hard_limit)
                              .where(USER_QUOTAS.c.project_id == project_id)):
            user_sums[r.resource] = user_sums.get(r.resource, 0) + (r.hard_limit or 0)
    return _limits(conn, conf, project_rows(conn, project_id), used, user_sums)


def user_quotas(conn, conf, project_id: str, user_id: str, *, usages: bool = False) -> dict:
    rows = dict(project_rows(conn, project_id))
    rows.update(user_rows(conn, project_id, user_id))
    return _limits(conn, conf, rows, counts(conn, conf, project_id, user_id) if usages else None)


def _sum(a: int, b: int) -> int:
    return UNLIMITED if a <= UNLIMITED or b <= UNLIMITED else a + b


def _sub(a: int, b: int) -> int:
    return UNLIMITED if a <= UNLIMITED or b <= UNLIMITED else a - b


def settable(conn, conf, project_id: str, user_id: str | None = None) -> dict[str, dict[str, int]]:
    """The range each limit may be set to: at least what is in use, at most what the project has left."""
    project = project_quotas(conn, conf, project_id, usages=True, remains=True)
    result = {}
    if user_id:
        own = user_rows(conn, project_id, user_id)
        user = user_quotas(conn, conf, project_id, user_id, usages=True)
        for resource, value in user.items():
            result[resource] = {"minimum": value["in_use"],
                                "maximum": _sum(project[resource]["remains"], own.get(resource, 0))}
    else:
        for resource, value in project.items():
            result[resource] = {"minimum": max(int(_sub(value["limit"], value["remains"])), int(value["in_use"])),
                                "maximum": UNLIMITED}
    return result


def _upsert(conn, table, keys: dict, resource: str, hard_limit: int) -> None:
    where = and_(*(table.c[k] == v for k, v in keys.items()), table.c.resource == resource)
    done = conn.execute(update(table).where(where).values(hard_limit=hard_limit, updated_at=models.utcnow()))
    if done.rowcount:
        return
    try:
        with conn.begin_nested():
            conn.execute(insert(table).values(**keys, resource=resource, hard_limit=hard_limit,
                                              created_at=models.utcnow()))
    except IntegrityError:  # a concurrent writer inserted it first: the last write wins, as an update
        conn.execute(update(table).where(where).values(hard_limit=hard_limit, updated_at=models.utcnow()))


def set_project_limit(conn, project_id: str, resource: str, hard_limit: int, user_id: str | None = None) -> None:
    if user_id:
        _upsert(conn, USER_QUOTAS, {"project_id": project_id, "user_id": user_id}, resource, hard_limit)
    else:
        _upsert(conn, QUOTAS, {"project_id": project_id}, resource, hard_limit)


def set_class_limit(conn, class_name: str, resource: str, hard_limit: int) -> None:
    _upsert(conn, CLASSES, {"class_name": class_name}, resource, hard_limit)


def destroy_project(conn, project_id: str, user_id: str | None = None) -> None:
    if user_id:
        conn.execute(delete(USER_QUOTAS).where(and_(USER_QUOTAS.c.project_id == project_id,
                                                    USER_QUOTAS.c.user_id == user_id)))
        return
    conn.execute(delete(QUOTAS).where(QUOTAS.c.project_id == project_id))
    conn.execute(delete(USER_QUOTAS).where(USER_QUOTAS.c.project_id == project_id))


def lock_project(conn, project_id: str) -> None:
    """Serialise the quota-checked writes of one project until the transaction ends.

    Call it first in the writing transaction (before any read). PostgreSQL: a transaction-scoped
    advisory lock. MariaDB: a row lock on the project's sentinel row in ``quotas``; the row is
    made beforehand in its own autocommit statement, so the locking read always finds it and
    takes no gap lock (two writers inserting it under gap locks would deadlock). SQLite
    serialises every writer already.
    """
    dialect = conn.dialect.name
    if len(project_id) > _LOCK_KEY_LENGTH:
        # a key pair's lock is "user:" and a user id of up to 255 characters: a key that long names
        # its sentinel row by digest (within the column; truncated, it would never be found again)
        project_id = "sha256:" + hashlib.sha256(project_id.encode()).hexdigest()
    if dialect == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:p))"), {"p": "openkeel-quota:" + project_id})
    elif dialect in ("mysql", "mariadb"):
        params = {"p": project_id, "r": _LOCK_RESOURCE}
        with conn.engine.connect() as side:
            side.execute(text("INSERT IGNORE INTO quotas (project_id, resource, hard_limit, created_at) "
                              "VALUES (:p, :r, NULL, NOW())"), params)
            side.commit()
        conn.execute(text("SELECT id FROM quotas WHERE project_id = :p AND resource = :r FOR UPDATE"), params)


# The sentinel row MariaDB writers lock (not a resource: never listed, never counted).
_LOCK_RESOURCE = "~lock"
_LOCK_KEY_LENGTH = 255  # quotas.project_id


def _effective(conn, conf, project_id: str, user_id: str | None) -> tuple[dict, dict, dict, dict]:
    """(project limits, project usages, user limits, user usages) of the countable resources."""
    proj = project_quotas(conn, conf, project_id)
    proj_limits = {r: v["limit"] for r, v in proj.items()}
    proj_used = counts(conn, conf, project_id)
    if user_id is None:
        return proj_limits, proj_used, {}, {}
    user = user_quotas(conn, conf, project_id, user_id)
    return proj_limits, proj_used, {r: v["limit"] for r, v in user.items()}, counts(conn, conf, project_id, user_id)


def check_deltas(conn, conf, project_id: str, user_id: str | None, deltas: dict[str, int]):
    """Over-limit resources for usage + deltas (project, then the user's own limits if it has any).

    Returns (overs sorted, limits, usages) of the binding scope, or None when within the limits.
    """
    if _noop(conf):
        return None
    proj_limits, proj_used, user_limits, user_used = _effective(conn, conf, project_id, user_id)
    overs = set()
    limits, usages = dict(proj_limits), dict(proj_used)
    for resource, delta in deltas.items():
        for lim, used in ((proj_limits, proj_used), (user_limits, user_used)):
            if resource not in lim:
                continue
            limit = lim[resource]
            if limit >= 0 and used.get(resource, 0) + delta > limit:
                overs.add(resource)
                if lim is user_limits:
                    limits[resource], usages[resource] = limit, used.get(resource, 0)
    return (sorted(overs), limits, usages) if overs else None


def _headroom(limits: dict, usages: dict, deltas: dict) -> dict:
    headroom = {r: limits[r] - usages.get(r, 0) for r in deltas}
    for resource in ("cores", "ram"):
        if limits.get(resource) == UNLIMITED:
            if deltas.get(resource):
                headroom[resource] = headroom.get("instances", 1) * deltas[resource] / deltas.get("instances", 1)
            else:
                headroom[resource] = headroom.get("instances", 1)
    return headroom


def _detail(headroom: dict, overs: list, limits: dict, requested: dict) -> tuple[str, str, str, str]:
    reqs = [str(requested[r]) for r in overs]
    useds = [str(limits[r] - headroom[r]) for r in overs]
    alloweds = [str(limits[r]) for r in overs]
    return ", ".join(overs), ", ".join(reqs), ", ".join(alloweds), ", ".join(useds)


def too_many(overs: str, req: str, used: str, allowed: str) -> OverQuota:
    return OverQuota(f"Quota exceeded for {overs}: Requested {req}, but already used {used} of {allowed} {overs}")


def check_num_instances(conn, conf, project_id: str, user_id: str, vcpus: int, memory_mb: int,
                        min_count: int, max_count: int) -> int:
    """How many of max_count instances fit (at least min_count), or Nova's 403 message."""
    own = user_rows(conn, project_id, user_id)
    scope_user = user_id if any(r in own for r in ("instances", "cores", "ram")) else None
    while True:
        deltas = {"instances": max_count, "cores": max_count * vcpus, "ram": max_count * memory_mb}
        over = check_deltas(conn, conf, project_id, scope_user, deltas)
        if over is None:
            return max_count
        overs, limits, usages = over
        headroom = _headroom(limits, usages, deltas)
        allowed = headroom.get("instances", 1)
        if vcpus:
            allowed = min(allowed, headroom["cores"] // vcpus)
        if memory_mb:
            allowed = min(allowed, headroom["ram"] // memory_mb)
        allowed = int(allowed)
        if allowed > 0 and min_count <= allowed <= max_count:
            max_count = allowed
            continue
        number = str(min_count) if min_count == max_count else f"{min_count}-{max_count}"
        requested = {"instances": number, "cores": deltas["cores"], "ram": deltas["ram"]}
        names, reqs, alloweds, useds = _detail(headroom, overs, limits, requested)
        raise too_many(names, reqs, useds, alloweds)


def check_key_pairs(conn, conf, project_id: str, user_id: str, count: int, delta: int = 1) -> None:
    """Key pairs are counted per user against the caller's user (else project, class, option) limit."""
    if _noop(conf):
        return
    limit = user_quotas(conn, conf, project_id, user_id)["key_pairs"]["limit"]
    if limit >= 0 and count + delta > limit:
        raise OverQuota("Quota exceeded, too many key pairs.")


def _limit(conn, conf, project_id: str, user_id: str, resource: str) -> int:
    """The caller's limit of an absolute resource (its own row, else the project's, class, option)."""
    if _noop(conf):
        return UNLIMITED
    return user_quotas(conn, conf, project_id, user_id)[resource]["limit"]


def check_metadata_and_files(conn, conf, project_id: str, user_id: str, metadata: dict | None,
                             personality: list | None) -> None:
    """Nova's metadata items and injected files (personality) limits at boot and rebuild."""
    if metadata:
        allowed = _limit(conn, conf, project_id, user_id, "metadata_items")
        if 0 <= allowed < len(metadata):
            raise OverQuota(f"Maximum number of metadata items exceeds {allowed}")
    if not personality:
        return
    allowed = _limit(conn, conf, project_id, user_id, "injected_files")
    if 0 <= allowed < len(personality):
        raise OverQuota("Personality file limit exceeded")
    max_path = max(len(f.get("path", "")) for f in personality)
    max_content = max(len(f.get("contents", "")) for f in personality)
    path_limit = _limit(conn, conf, project_id, user_id, "injected_file_path_bytes")
    content_limit = _limit(conn, conf, project_id, user_id, "injected_file_content_bytes")
    # The path limit is reported before the content limit, as in Nova.
    if 0 <= path_limit < max_path:
        raise OverQuota(f"Personality file path exceeds maximum {path_limit}")
    if 0 <= content_limit < max_content:
        raise OverQuota(f"Personality file content exceeds maximum {content_limit}")


def check_upsize(conn, conf, project_id: str, user_id: str, old: dict, new: dict) -> None:
    """Nova's resize check: only what grows (cores, ram) must fit, in the project and for the owner.

    For the resize handler (call it after ``lock_project`` in the transaction that records the
    resize); ``old``/``new`` are flavors (vcpus, memory_mb). Raises Nova's 403 message.
    """
    deltas = {}
    if new["vcpus"] - old["vcpus"] > 0:
        deltas["cores"] = new["vcpus"] - old["vcpus"]
    if new["memory_mb"] - old["memory_mb"] > 0:
        deltas["ram"] = new["memory_mb"] - old["memory_mb"]
    if not deltas:
        return
    over = check_deltas(conn, conf, project_id, user_id, {"cores": deltas.get("cores", 0), "ram": deltas.get("ram", 0)})
    if over is None:
        return
    overs, limits, usages = over
    headroom = _headroom(limits, usages, deltas)
    names, reqs, alloweds, useds = _detail(headroom, overs, limits, deltas)
    raise too_many(names, reqs, useds, alloweds)
