"""/os-server-groups: create, list, show and delete, as Nova 34.0.0 answers at every microversion
(2.13 project and user ids, 2.15 soft policies, 2.64 ``policy`` and ``rules`` with
``max_server_per_host``, 2.75 and 2.102 strict queries), with the ``server_groups`` quota.

A server joins a group when it is booted with the ``group`` scheduler hint (servers_create.py, with the
``server_group_members`` quota); where the controller places it honours the group's policy
(compute/server_groups.py, controller/steps/placing.py).
"""

from __future__ import annotations

import copy
from typing import Any

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import quotas
from openkeel_compute.compute import server_groups as groups
from openkeel_compute.policies import operator as rules

_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_POSITIVE = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 1, "minLength": 1}


def _body(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": {"server_group": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}},
        "required": ["server_group"], "additionalProperties": False}


def _policies(enum: list[str]) -> dict:
    return {"type": "array", "prefixItems": [{"type": "string", "enum": enum}], "uniqueItems": True,
            "minItems": 1, "maxItems": 1, "additionalItems": False}


_HARD = ["anti-affinity", "affinity"]
_ALL = ["anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"]
CREATE = {
    "2.0-2.14": _body({"name": _NAME, "policies": _policies(_HARD)}, ["name", "policies"]),
    "2.15-2.63": _body({"name": _NAME, "policies": _policies(_HARD + ["soft-anti-affinity", "soft-affinity"])},
                       ["name", "policies"]),
    "2.64-": _body({"name": _NAME, "policy": {"type": "string", "enum": _ALL},
                    "rules": {"type": "object", "properties": {"max_server_per_host": _POSITIVE},
                              "additionalProperties": False}}, ["name", "policy"]),
}
_MULTI_STRING = {"type": "array", "items": {"type": "string"}}
_NON_NEGATIVE = {"type": "array", "items": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0,
                                            "minLength": 1}}
_index_query: dict[str, Any] = {"type": "object", "properties": {
    "all_projects": _MULTI_STRING, "limit": _NON_NEGATIVE, "offset": _NON_NEGATIVE}, "additionalProperties": True}
_index_query_v275 = copy.deepcopy(_index_query)
_index_query_v275["additionalProperties"] = False
INDEX_QUERY = {"2.0-2.74": _index_query, "2.75-": _index_query_v275}
SHOW_QUERY = {"2.0-2.101": {"type": "object", "properties": {}, "additionalProperties": True},
              "2.102-": {"type": "object", "properties": {}, "additionalProperties": False}}


def _found(conn, group_id: str) -> dict:
    try:
        return groups.get(conn, group_id)
    except groups.GroupNotFound as exc:
        raise faults.NotFound(exc.message) from None


@operation(query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, group_id):
    with common.read(req) as conn:
        group = _found(conn, group_id)
        common.can(req, rules.SERVER_GROUPS % "show", {"project_id": group["project_id"]})
        live = groups.members(conn, [group["id"]])[group["id"]]
    return {"server_group": groups.view(group, live, req.version)}


@operation(success=204, expected=(404,))
@wsgi_path_params
def delete(req, group_id):
    with common.write(req) as conn:
        group = _found(conn, group_id)
        common.can(req, rules.SERVER_GROUPS % "delete", {"project_id": group["project_id"]})
        if not groups.destroy(conn, group["id"]):
            raise faults.NotFound(f"Instance group {group_id} could not be found.")
    return Response(None)


@operation(query=INDEX_QUERY)
def index(req):
    project_id = req.context.project_id
    common.can(req, rules.SERVER_GROUPS % "index", {"project_id": project_id})
    every = "all_projects" in req.query and req.context.is_admin
    if every:
        common.can(req, rules.SERVER_GROUPS % "index:all_projects", {"project_id": project_id})
    limit = common.limit(req)  # Nova's pagination reads limit, then offset: each int() refuses is its 400
    offset = common.query_int(req, "offset") or 0
    with common.read(req) as conn:
        found = groups.listed(conn, None if every else project_id)[offset:offset + limit]
        live = groups.members(conn, [g["id"] for g in found])
    return {"server_groups": [groups.view(g, live[g["id"]], req.version) for g in found]}


def _check_quota(req, conn, delta: int) -> None:
    conf = common.services(req).conf
    if quotas.check_deltas(conn, conf, req.context.project_id, req.context.user_id, {"server_groups": delta}):
        raise faults.Forbidden("Quota exceeded, too many server groups.")


@operation(body=CREATE, expected=(400, 403, 409))
def create(req):
    project_id = req.context.project_id
    common.can(req, rules.SERVER_GROUPS % "create", {"project_id": project_id})
    values = req.body["server_group"]
    if req.version >= (2, 64):
        policy = values["policy"]
        group_rules = values.get("rules", {})
        if policy != "anti-affinity" and group_rules:
            raise faults.BadRequest("Only anti-affinity policy supports rules.")
        if "max_server_per_host" in group_rules:
            group_rules = {"max_server_per_host": int(group_rules["max_server_per_host"])}
    else:
        policy, group_rules = values["policies"][0], {}
    with common.write(req) as conn:
        quotas.lock_project(conn, project_id)
        _check_quota(req, conn, 1)
        group = groups.create(conn, name=values["name"], project_id=project_id, user_id=req.context.user_id,
                              policy=policy, rules=group_rules)
    return {"server_group": groups.view(group, [], req.version)}
