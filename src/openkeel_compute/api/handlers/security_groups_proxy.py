"""/os-security-groups and /os-security-group-rules, Nova's proxies to Neutron's security groups, up
to 2.35 (404 after), answered as Nova 34.0.0 answers: the project's groups (every project's for an
admin asking ``all_tenants``), ``limit`` and ``offset`` as Nova pages them, each group with its
ingress rules in nova-network's shape (``ip_protocol``, ``from_port``/``to_port`` 1–65535 for TCP and
UDP without ports, -1 otherwise, ``ip_range`` from the remote prefix (0.0.0.0/0 when none) or
``group`` from the remote group).

Writes go to Neutron with the caller's token, with Nova's checks and words: a group is created,
renamed or deleted (Neutron's refusals: 400, a quota 403, a group in use 400); a rule is always an
ingress rule, from a CIDR (protocol and ports required) or from another group (every port of TCP
and UDP, every ICMP type, when none are given), checked as Nova checks it before Neutron is asked.
Where Nova passes Neutron's refusal on, its text is neutronclient's (message, then the request id).

Without [neutron] the one group is the project's ``default`` with no rules (the pod network does not
filter traffic), as the server's os-security-groups shows it; it can be neither renamed nor deleted
(Neutron's words) and there is room for no other group or rule (Nova's quota answer, 403).
"""

from __future__ import annotations

import ipaddress
import urllib.parse

from oslo_utils import uuidutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.network_common import group_view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import networks as pod
from openkeel_compute.network import errors as net_errors
from openkeel_compute.policies import server_subresources as rules

VERSIONS = "-2.35"
_NON_NEGATIVE = {"type": "string", "pattern": "^[0-9]*$"}  # Nova's non_negative_integer
INDEX_QUERY = {"2.0-2.35": {"type": "object", "properties": {
    "limit": {"type": "array", "items": _NON_NEGATIVE}, "offset": {"type": "array", "items": _NON_NEGATIVE},
    "all_tenants": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": True}}
SHOW_QUERY = {"2.0-2.35": {"type": "object", "properties": {}, "additionalProperties": True}}
_TEXT = {"type": "string", "minLength": 0, "maxLength": 255}
GROUP_BODY = {"2.0-2.35": {
    "type": "object", "properties": {"security_group": {
        "type": "object", "properties": {"name": _TEXT, "description": _TEXT},
        "required": ["name", "description"], "additionalProperties": True}},
    "required": ["security_group"], "additionalProperties": True}}
RULE_BODY = {"2.0-2.35": {
    "type": "object", "properties": {"security_group_rule": {
        "type": "object", "properties": {
            "group_id": {"type": ["string", "null"], "format": "uuid"},
            "parent_group_id": {"type": "string", "format": "uuid"},
            "to_port": {}, "from_port": {}, "ip_protocol": {}, "cidr": {}},
        "required": ["parent_group_id"], "additionalProperties": True}},
    "required": ["security_group_rule"], "additionalProperties": True}}
QUOTA = "Quota exceeded, too many security groups."  # Nova's SecurityGroupLimitExceeded without Neutron
# webob's HTTPBadRequest explanation: what Nova answers when Neutron refuses its credential on a write
BARE_BAD_REQUEST = ("The server could not comply with the request since it is either malformed or "
                    "otherwise incorrect.")


_ports = network_common.rule_ports
_rule_view = network_common.rule_view
_group_view = network_common.neutron_group_view
_names = network_common.remote_names


def _last_int(req, name: str) -> int:
    return common.query_int(req, name) or 0  # Nova's 400 for what int() refuses (a lone newline passes the schema)


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
    limit = min(_last_int(req, "limit") or common.services(req).conf.api.max_limit,
                common.services(req).conf.api.max_limit)
    offset = _last_int(req, "offset")  # read after limit, as Nova's pagination reads them
    # Nova pages Neutron's order, then sorts the page by project and name
    return {"security_groups": sorted(groups[offset:offset + limit], key=lambda g: (g["tenant_id"] or "",
                                                                                   g["name"] or ""))}


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


# -- writes ------------------------------------------------------------------------------------------------

def _valid_id(ident: str) -> str:
    if not uuidutils.is_uuid_like(ident):
        raise faults.BadRequest("Security group id should be uuid")
    return ident


def _pod_group(project_id: str, group_id: str) -> str:
    """The name of the pod network's group with that id (404 in Neutron's words otherwise)."""
    for name in pod.GROUPS:
        if pod.group_id(project_id, name) == group_id:
            return name
    raise faults.NotFound(f"Security group {group_id} does not exist")


def _calls(req):
    return network_common.client(req).for_caller(req.context, req.environ)


def _get(calls, group_id: str) -> dict:
    """The group (Nova's ``security_group_api.get``): 404 with neutronclient's text when not shown."""
    try:
        return calls.show_security_group(group_id)
    except net_errors.SecurityGroupNotFound as exc:
        raise faults.NotFound(exc.message) from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None


def _refused(exc: net_errors.NetworkError, mapping: dict[int, type[faults.Fault]]) -> faults.Fault:
    """Nova's translation of a Neutron refusal on a write: the status it maps, with neutronclient's text;
    a refused credential is webob's bare 400."""
    if isinstance(exc, net_errors.Unauthorized):
        return faults.BadRequest(BARE_BAD_REQUEST)
    if isinstance(exc, net_errors.NeutronError) and exc.status in mapping:
        return mapping[exc.status](exc.text)
    return network_common.answer(exc)


def _body(req) -> tuple[str, str]:
    group = req.body["security_group"]
    return group["name"], group["description"]


@operation(versions=VERSIONS, body=GROUP_BODY, expected=(400, 403))
def create(req):
    common.can(req, rules.SECURITY_GROUPS % "create", {"project_id": req.context.project_id})
    name, description = _body(req)
    if not network_common.enabled(req):
        raise faults.Forbidden(QUOTA)
    try:
        group = _calls(req).create_security_group(name, description)
    except net_errors.NetworkError as exc:
        raise _refused(exc, {400: faults.BadRequest, 409: faults.Forbidden}) from None
    return {"security_group": _group_view(group, {})}


@operation(versions=VERSIONS, body=GROUP_BODY, expected=(400, 404))
@wsgi_path_params
def update(req, security_group_id):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "update", {"project_id": project_id})
    _valid_id(security_group_id)
    if not network_common.enabled(req):
        _pod_group(project_id, security_group_id)
        raise faults.BadRequest("Updating default security group not allowed.")  # Neutron's words
    calls = _calls(req)
    _get(calls, security_group_id)
    name, description = _body(req)
    try:
        group = calls.update_security_group(security_group_id, name, description)
        names = _names(calls, [group])
    except net_errors.NetworkError as exc:
        raise _refused(exc, {404: faults.NotFound}) from None
    return {"security_group": _group_view(group, names)}


@operation(versions=VERSIONS, success=202, expected=(400, 404))
@wsgi_path_params
def delete(req, security_group_id):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "delete", {"project_id": project_id})
    _valid_id(security_group_id)
    if not network_common.enabled(req):
        _pod_group(project_id, security_group_id)
        raise faults.BadRequest("Insufficient rights for removing default security group.")  # Neutron's words
    calls = _calls(req)
    _get(calls, security_group_id)
    try:
        calls.delete_security_group(security_group_id)
    except net_errors.NetworkError as exc:
        raise _refused(exc, {404: faults.NotFound, 409: faults.BadRequest}) from None
    return Response(None)


def parse_cidr(cidr) -> str:
    """Nova's ``parse_cidr``: 0.0.0.0/0 when none; a URL-quoted CIDR unquoted; 400 when not a network."""
    if not cidr:
        return "0.0.0.0/0"
    text = urllib.parse.unquote(cidr if isinstance(cidr, str) else str(cidr))
    try:
        if not text.partition("/")[2]:
            raise ValueError(text)
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise faults.BadRequest(f"{text} is not a valid IP network.") from None
    return text


def _port(value) -> int:
    if isinstance(value, (dict, list)) or value is None:
        raise TypeError(value)
    return int(value)


def new_ingress_rule(protocol, from_port, to_port, *, group_id=None, cidr=None) -> dict | None:
    """Nova's ``_new_ingress_rule``: the rule's fields, or None when a CIDR rule lacks its protocol or
    ports; 400 with Nova's words for ports or a protocol it refuses."""
    values: dict = {}
    if group_id:
        values["group_id"] = group_id
        upper = protocol.upper() if isinstance(protocol, str) else ""
        if upper == "ICMP" and from_port is None and to_port is None:
            from_port = to_port = -1
        elif upper in ("TCP", "UDP") and from_port is None and to_port is None:
            from_port, to_port = 1, 65535
    elif cidr:
        values["cidr"] = cidr
    if protocol and from_port is not None and to_port is not None:
        protocol = str(protocol)
        upper = protocol.upper()
        try:
            low, high = _port(from_port), _port(to_port)
        except ValueError:
            reason = ("Type and Code must be integers for ICMP protocol type" if upper == "ICMP"
                      else "To and From ports must be integers")
            raise faults.BadRequest(f"Invalid input received: {reason}") from None
        except TypeError:
            raise faults.BadRequest(BARE_BAD_REQUEST) from None  # Nova's handler meets a TypeError
        if upper not in ("TCP", "UDP", "ICMP"):
            raise faults.BadRequest(f"Invalid IP protocol {protocol}.")
        if upper in ("TCP", "UDP") and low > high:
            raise faults.BadRequest(f"Invalid port range {low}:{high}. Former value cannot be greater than the later")
        if upper in ("TCP", "UDP") and (low < 1 or high > 65535):
            raise faults.BadRequest(f"Invalid port range {low}:{high}. Valid {upper} ports should be between 1-65535")
        if upper == "ICMP" and not (-1 <= low <= 255 and -1 <= high <= 255):
            raise faults.BadRequest(f"Invalid port range {low}:{high}. For ICMP, the type:code must be valid")
        values.update(protocol=protocol, from_port=low, to_port=high)
    elif cidr:
        return None
    return values


def _nova_rule(rule: dict) -> dict:
    """A Neutron rule as Nova's ``_convert_to_nova_security_group_rule_format`` sees it (for the
    already-exists check)."""
    low, high = _ports(rule)
    return {"group_id": rule.get("remote_group_id"), "cidr": rule.get("remote_ip_prefix") or "0.0.0.0/0",
            "protocol": rule.get("protocol"), "from_port": low, "to_port": high}


def _neutron_rule(rule: dict, parent_id: str) -> dict:
    """Nova's ``_make_neutron_security_group_rules_list`` for one rule."""
    cidr = rule.get("cidr")
    body = {"direction": "ingress", "protocol": rule.get("protocol"),
            "ethertype": "IPv6" if cidr and ipaddress.ip_network(cidr, strict=False).version == 6 else "IPv4",
            "remote_ip_prefix": cidr, "security_group_id": parent_id, "remote_group_id": rule.get("group_id")}
    if "from_port" in rule and rule["from_port"] != -1:
        body["port_range_min"] = rule["from_port"]
    if "to_port" in rule and rule["to_port"] != -1:
        body["port_range_max"] = rule["to_port"]
    return body


@operation(versions=VERSIONS, body=RULE_BODY, expected=(400, 403, 404))
def create_rule(req):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "rule:create", {"project_id": project_id})
    asked = req.body["security_group_rule"]
    group_id, parent_id = asked.get("group_id"), asked["parent_group_id"]
    enabled = network_common.enabled(req)
    calls = _calls(req) if enabled else None
    source: dict = {}
    if calls is None:
        _pod_group(project_id, parent_id)
        if group_id is not None:
            _pod_group(project_id, group_id)
        parent: dict = {"id": parent_id, "security_group_rules": []}
    else:
        parent = _get(calls, parent_id)
        if group_id is not None:
            source = _get(calls, group_id)
    if group_id is not None:
        new = new_ingress_rule(asked.get("ip_protocol"), asked.get("from_port"), asked.get("to_port"),
                               group_id=group_id)
    else:
        new = new_ingress_rule(asked.get("ip_protocol"), asked.get("from_port"), asked.get("to_port"),
                               cidr=parse_cidr(asked.get("cidr")))
    if new is None:
        raise faults.BadRequest("Not enough parameters to build a valid rule.")
    if "cidr" in new:
        network, _, prefix = new["cidr"].partition("/")
        if network not in ("0.0.0.0", "::") and prefix == "0":
            raise faults.BadRequest(f"Bad prefix for network in cidr {new['cidr']}")
    existing = [_nova_rule(r) for r in parent.get("security_group_rules") or [] if r.get("direction") == "ingress"]
    keys = ("group_id", "cidr", "from_port", "to_port", "protocol")
    if any(all(rule.get(k) == new.get(k) for k in keys) for rule in existing):
        raise faults.BadRequest(f"This rule already exists in group {parent['id']}")
    if calls is None:
        raise faults.Forbidden(QUOTA)
    try:
        made = calls.create_security_group_rules([_neutron_rule(new, parent["id"])])[0]
    except net_errors.NetworkError as exc:
        raise _refused(exc, {404: faults.NotFound, 409: faults.Forbidden, 400: faults.BadRequest}) from None
    names = {group_id: {"name": source.get("name"), "tenant_id": source.get("tenant_id")}} if group_id else {}
    view = _rule_view(made, names)
    if view is None:  # the source group went away meanwhile
        view = _rule_view({**made, "remote_group_id": None}, {})
    return {"security_group_rule": view}


@operation(versions=VERSIONS, success=202, expected=(400, 404, 409))
@wsgi_path_params
def delete_rule(req, security_group_rule_id):
    project_id = req.context.project_id
    common.can(req, rules.SECURITY_GROUPS % "rule:delete", {"project_id": project_id})
    _valid_id(security_group_rule_id)
    if not network_common.enabled(req):
        raise faults.NotFound(f"Security group rule {security_group_rule_id} does not exist")  # Neutron's words
    calls = _calls(req)
    try:
        rule = calls.show_security_group_rule(security_group_rule_id)
    except net_errors.NeutronError as exc:
        if exc.status == 404:
            raise faults.NotFound(exc.text) from None
        raise network_common.answer(exc) from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    _get(calls, rule["security_group_id"])
    try:
        calls.delete_security_group_rule(rule["id"])
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return Response(None)
