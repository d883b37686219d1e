"""GET /os-security-groups and /os-security-groups/{id}, Nova's proxy to Neutron's security groups, up
to 2.35 (404 after), answered as Nova 34.0.0 answers: the project's groups (every project's for an
admin asking ``all_tenants``), ``limit`` and ``offset`` as Nova pages them, each group with its
ingress rules in nova-network's shape (``ip_protocol``, ``from_port``/``to_port`` 1–65535 for TCP and
UDP without ports, -1 otherwise, ``ip_range`` from the remote prefix (0.0.0.0/0 when none) or
``group`` from the remote group).

Without [neutron] the one group is the project's ``default`` with no rules (the pod network does not
filter traffic), as the server's os-security-groups shows it. Creating, updating and deleting groups
and rules are still to come.
"""

from __future__ import annotations

from oslo_utils import uuidutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.network_common import group_view
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import networks as pod
from openkeel_compute.network import errors as net_errors
from openkeel_compute.policies import server_subresources as rules

VERSIONS = "-2.35"
_NON_NEGATIVE = {"type": "string", "pattern": "^[0-9]*$"}  # Nova's non_negative_integer
INDEX_QUERY = {"2.0-2.35": {"type": "object", "properties": {
    "limit": {"type": "array", "items": _NON_NEGATIVE}, "offset": {"type": "array", "items": _NON_NEGATIVE},
    "all_tenants": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": True}}
SHOW_QUERY = {"2.0-2.35": {"type": "object", "properties": {}, "additionalProperties": True}}


def _rule_view(rule: dict, names: dict[str, dict]) -> dict | None:
    protocol = rule.get("protocol")
    low, high = rule.get("port_range_min"), rule.get("port_range_max")
    if protocol and low is None and high is None:
        low, high = (1, 65535) if protocol.upper() in ("TCP", "UDP") else (-1, -1)
    view = {"id": rule["id"], "parent_group_id": rule["security_group_id"], "ip_protocol": protocol,
            "from_port": low, "to_port": high, "group": {}, "ip_range": {}}
    if rule.get("remote_group_id"):
        source = names.get(rule["remote_group_id"])
        if source is None:
            return None  # a group that no longer exists: Nova leaves the rule out
        view["group"] = source
    else:
        view["ip_range"] = {"cidr": rule.get("remote_ip_prefix") or "0.0.0.0/0"}
    return view


def _group_view(group: dict, names: dict[str, dict]) -> dict:
    rules_ = [_rule_view(r, names) for r in group.get("security_group_rules") or [] if r.get("direction") == "ingress"]
    return {"id": group["id"], "description": group.get("description"), "name": group.get("name"),
            "tenant_id": group.get("tenant_id"), "rules": [r for r in rules_ if r is not None]}


def _names(calls, groups: list[dict]) -> dict[str, dict]:
    """{group id: {name, tenant_id}} of the groups listed and of the remote groups their rules name."""
    names = {g["id"]: {"name": g.get("name"), "tenant_id": g.get("tenant_id")} for g in groups}
    for group in groups:
        for rule in group.get("security_group_rules") or []:
            remote = rule.get("remote_group_id")
            if remote and remote not in names and rule.get("direction") == "ingress":
                try:
                    source = calls.show_security_group(remote)
                except net_errors.SecurityGroupNotFound:
                    continue
                names[remote] = {"name": source.get("name"), "tenant_id": source.get("tenant_id")}
    return names


def _last_int(req, name: str) -> int:
    values = req.query.get(name)
    return int(values[-1]) if values and values[-1] else 0


@operation(versions=VERSIONS, query=INDEX_QUERY, expected=(404,))
def index(req):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "get", {"project_id": project_id})
    if not network_common.enabled(req):
        groups = [group_view(project_id, name) for name in pod.GROUPS]
    else:
        calls = network_common.client(req).for_caller(req.context, req.environ)
        params = {} if req.context.is_admin and "all_tenants" in req.query else {"tenant_id": project_id}
        try:
            raw = calls.list_security_groups(**params)
            names = _names(calls, raw)
        except net_errors.NetworkError as exc:
            raise network_common.answer(exc) from None
        groups = [_group_view(g, names) for g in raw]
    offset = _last_int(req, "offset")
    limit = min(_last_int(req, "limit") or common.services(req).conf.api.max_limit,
                common.services(req).conf.api.max_limit)
    return {"security_groups": groups[offset:offset + limit]}


@operation(versions=VERSIONS, query=SHOW_QUERY, expected=(400, 404))
@wsgi_path_params
def show(req, security_group_id):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "show", {"project_id": project_id})
    if not uuidutils.is_uuid_like(security_group_id):
        raise faults.BadRequest("Security group id should be uuid")
    if not network_common.enabled(req):
        for name in pod.GROUPS:
            if pod.group_id(project_id, name) == security_group_id:
                return {"security_group": group_view(project_id, name)}
        raise faults.NotFound(f"Security group {security_group_id} does not exist")  # Neutron's words
    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        group = calls.show_security_group(security_group_id)
        names = _names(calls, [group])
    except net_errors.SecurityGroupNotFound as exc:
        raise faults.NotFound(exc.message) from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return {"security_group": _group_view(group, names)}
