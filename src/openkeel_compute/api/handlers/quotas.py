"""/os-quota-sets, /os-quota-class-sets and /limits, as Nova 34.0.0 answers them.

Per microversion: the nova-network resources leave quota sets and limits at 2.36 (quota classes
at 2.50, which also adds the server-group ones there), the injected-file ones at 2.57; maxImageMeta
leaves /limits at 2.39.
"""

from __future__ import annotations

from oslo_utils import strutils

from openkeel_compute.api import common, faults, stored_text
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import keypairs_quotas as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import quotas
from openkeel_compute.policies import keypairs_quotas as rules


def _first(req, key: str):
    values = req.query.get(key)
    return values[0] if values else None


def _verify_project(req, project_id: str) -> None:
    verify = common.services(req).verify_project
    if verify is not None:
        verify(req.context, project_id, req.environ)


def _filtered(req) -> tuple[str, ...]:
    if req.at_least(2, 57):
        return quotas.FILTERED_V257
    if req.at_least(2, 36):
        return quotas.FILTERED_V236
    return ()


def _quota_set(project_id: str | None, values: dict, filtered) -> dict:
    body = {"id": str(project_id)} if project_id else {}
    body.update((r, values[r]) for r in quotas.RESOURCES if r not in filtered and r in values)
    return {"quota_set": body}


def _limits_of(conn, conf, project_id: str, user_id: str | None, *, usages: bool = False) -> dict:
    if user_id:
        values = quotas.user_quotas(conn, conf, project_id, user_id, usages=usages)
    else:
        values = quotas.project_quotas(conn, conf, project_id, usages=usages)
    if usages:
        return {r: {"in_use": v["in_use"], "limit": v["limit"], "reserved": 0} for r, v in values.items()}
    return {r: v["limit"] for r, v in values.items()}


@operation(query=schema.QUOTA_SET_QUERY, expected=(400,))
@wsgi_path_params
def show(req, project_id):
    common.can(req, rules.QUOTA_SETS % "show", {"project_id": project_id})
    _verify_project(req, project_id)
    with common.read(req) as conn:
        values = _limits_of(conn, common.services(req).conf, project_id, _first(req, "user_id"))
    return _quota_set(project_id, values, _filtered(req))


@operation(query=schema.QUOTA_SET_QUERY, expected=(400,))
@wsgi_path_params
def detail(req, project_id):
    common.can(req, rules.QUOTA_SETS % "detail", {"project_id": project_id})
    _verify_project(req, project_id)
    user_id = req.query["user_id"][-1] if req.query.get("user_id") else None
    with common.read(req) as conn:
        values = _limits_of(conn, common.services(req).conf, project_id, user_id, usages=True)
    return _quota_set(project_id, values, _filtered(req))


@operation(query=schema.QUOTA_DEFAULTS_QUERY, expected=(400,))
@wsgi_path_params
def defaults(req, project_id):
    common.can(req, rules.QUOTA_SETS % "defaults", {"project_id": project_id})
    _verify_project(req, project_id)
    with common.read(req) as conn:
        values = quotas.defaults(conn, common.services(req).conf)
    return _quota_set(project_id, values, _filtered(req))


def _infinite(value: int) -> float:
    return float("inf") if value == -1 else value


@operation(body=schema.QUOTA_SET_UPDATE, query=schema.QUOTA_SET_QUERY, expected=(400,))
@wsgi_path_params
def update(req, project_id):
    common.can(req, rules.QUOTA_SETS % "update", {"project_id": project_id})
    user_id = _first(req, "user_id")
    stored_text.refuse_long_id(project_id, "the project id")
    stored_text.refuse_long_id(user_id, "user_id")
    _verify_project(req, project_id)
    quota_set = req.body["quota_set"]
    force = strutils.bool_from_string(quota_set.get("force", "False"))
    conf = common.services(req).conf
    with common.write(req) as conn:
        quotas.lock_project(conn, project_id)
        settable = quotas.settable(conn, conf, project_id, user_id)
        wanted = {}
        for key, value in quota_set.items():
            if key == "force" or (not value and value != 0):
                continue
            value = int(value)
            if not force:
                minimum, maximum = settable[key]["minimum"], settable[key]["maximum"]
                if _infinite(value) < _infinite(minimum):
                    raise faults.BadRequest(f"Quota limit {value} for {key} must be greater than or equal to "
                                            f"already used and reserved {minimum}.")
                if _infinite(value) > _infinite(maximum):
                    raise faults.BadRequest(f"Quota limit {value} for {key} must be less than or equal to "
                                            f"{maximum}.")
            wanted[key] = value
        for key, value in wanted.items():
            quotas.set_project_limit(conn, project_id, key, value, user_id=user_id)
        values = _limits_of(conn, conf, project_id, user_id)
    return _quota_set(None, values, _filtered(req))


@operation(query=schema.QUOTA_SET_QUERY, success=202)
@wsgi_path_params
def delete(req, project_id):
    common.can(req, rules.QUOTA_SETS % "delete", {"project_id": project_id})
    with common.write(req) as conn:
        quotas.destroy_project(conn, project_id, _first(req, "user_id"))
    return Response(None)


# --- quota classes ---------------------------------------------------------------------------------

_SERVER_GROUPS = ("server_groups", "server_group_members")


def _class_filtered(req) -> tuple[str, ...]:
    filtered = quotas.FILTERED_V257 if req.at_least(2, 57) else quotas.FILTERED_V236 if req.at_least(2, 50) else ()
    return filtered if req.at_least(2, 50) else filtered + _SERVER_GROUPS


def _quota_class_set(class_name: str | None, values: dict, filtered) -> dict:
    body = {"id": str(class_name)} if class_name else {}
    body.update((r, values[r]) for r in quotas.RESOURCES if r not in filtered and r in values)
    return {"quota_class_set": body}


@operation(query=schema.QUOTA_CLASS_QUERY)
@wsgi_path_params
def class_show(req, class_name):
    common.can(req, rules.QUOTA_CLASS_SETS % "show", {})
    with common.read(req) as conn:
        values = quotas.class_limits(conn, common.services(req).conf, class_name)
    return _quota_class_set(class_name, values, _class_filtered(req))


@operation(body=schema.QUOTA_CLASS_UPDATE, expected=(400,))
@wsgi_path_params
def class_update(req, class_name):
    common.can(req, rules.QUOTA_CLASS_SETS % "update", {})
    if len(class_name) > 255:
        raise faults.BadRequest(f"quota_class_name has {len(class_name)} characters, more than 255.")
    with common.write(req) as conn:
        for key, value in req.body["quota_class_set"].items():
            quotas.set_class_limit(conn, class_name, key, int(value))
        values = quotas.class_limits(conn, common.services(req).conf, class_name)
    return _quota_class_set(None, values, _class_filtered(req))


# --- limits ------------------------------------------------------------------------------------------

_LIMIT_NAMES = {
    "ram": ("maxTotalRAMSize",), "instances": ("maxTotalInstances",), "cores": ("maxTotalCores",),
    "key_pairs": ("maxTotalKeypairs",), "floating_ips": ("maxTotalFloatingIps",),
    "metadata_items": ("maxServerMeta", "maxImageMeta"), "injected_files": ("maxPersonality",),
    "injected_file_content_bytes": ("maxPersonalitySize",), "security_groups": ("maxSecurityGroups",),
    "security_group_rules": ("maxSecurityGroupRules",), "server_groups": ("maxServerGroups",),
    "server_group_members": ("maxServerGroupMembers",),
}
_USED_NAMES = (("totalRAMUsed", "ram"), ("totalCoresUsed", "cores"), ("totalInstancesUsed", "instances"),
               ("totalFloatingIpsUsed", "floating_ips"), ("totalSecurityGroupsUsed", "security_groups"),
               ("totalServerGroupsUsed", "server_groups"))
_LIMITS_V236 = ("floating_ips", "security_groups", "security_group_rules")
_LIMITS_V257 = _LIMITS_V236 + ("injected_files", "injected_file_content_bytes")


@operation(query=schema.LIMITS_QUERY)
def limits(req):
    filtered = _LIMITS_V257 if req.at_least(2, 57) else _LIMITS_V236 if req.at_least(2, 36) else ()
    common.can(req, rules.LIMITS, {})
    project_id = req.context.project_id
    if "tenant_id" in req.query:
        project_id = req.query["tenant_id"][-1]
        common.can(req, rules.LIMITS_OTHER_PROJECT)
    with common.read(req) as conn:
        values = quotas.project_quotas(conn, common.services(req).conf, project_id, usages=True)
    absolute = {}
    for resource, entry in values.items():
        if resource in _LIMIT_NAMES and entry["limit"] is not None and resource not in filtered:
            for name in _LIMIT_NAMES[resource]:
                if name == "maxImageMeta" and req.at_least(2, 39):
                    continue
                absolute[name] = entry["limit"]
    for name, resource in _USED_NAMES:
        if resource in values and resource not in filtered:
            absolute[name] = values[resource]["in_use"]
    return {"limits": {"rate": [], "absolute": absolute}}
