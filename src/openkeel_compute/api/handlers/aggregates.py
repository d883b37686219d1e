"""/os-aggregates: host aggregates, as Nova 34.0.0 answers them at every microversion (2.41 uuid,
2.81 image pre-caching, 2.102 strict queries).

Aggregates live in the database (compute/aggregates.py, with Nova's availability-zone rules); the
controller mirrors each into the Placement aggregate of the same uuid on its hosts' resource providers,
and gives the node of a host in an aggregate with ``availability_zone`` metadata that zone (its
``topology.kubernetes.io/zone`` label). Pre-caching images (2.81) is accepted as Nova accepts it
with a driver that cannot cache: 202, and nothing is cached (a server's disk is imported from its
image when it is built).
"""

from __future__ import annotations

import copy
from typing import Any

from oslo_utils import strutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import aggregates as store
from openkeel_compute.compute import compute_services as services_db
from openkeel_compute.policies import operator as rules

_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_NAME_V20 = {"type": "string", "format": "name_with_leading_trailing_spaces", "minLength": 1, "maxLength": 255}
_AZ = {"oneOf": [{"type": "string", "format": "az_name", "minLength": 1, "maxLength": 255}, {"type": "null"}]}
_AZ_V20 = {"oneOf": [{"type": "string", "format": "az_name_with_leading_trailing_spaces", "minLength": 1,
                      "maxLength": 255}, {"type": "null"}]}


def _wrap(name: str, inner: dict) -> dict:
    return {"type": "object", "properties": {name: inner}, "required": [name], "additionalProperties": False}


_create = _wrap("aggregate", {"type": "object", "properties": {"name": _NAME, "availability_zone": _AZ},
                              "required": ["name"], "additionalProperties": False})
_create_v20 = copy.deepcopy(_create)
_create_v20["properties"]["aggregate"]["properties"].update(name=_NAME_V20, availability_zone=_AZ_V20)
CREATE = {"2.0": _create_v20, "2.1-": _create}
_update = _wrap("aggregate", {"type": "object", "properties": {"name": _NAME_V20, "availability_zone": _AZ},
                              "additionalProperties": False,
                              "anyOf": [{"required": ["name"]}, {"required": ["availability_zone"]}]})
_update_v20 = copy.deepcopy(_update)
_update_v20["properties"]["aggregate"]["properties"]["availability_zone"] = _AZ_V20
UPDATE = {"2.0": _update_v20, "2.1-": _update}
_FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
ADD_HOST = _wrap("add_host", {"type": "object", "properties": {"host": _FQDN}, "required": ["host"],
                              "additionalProperties": False})
REMOVE_HOST = _wrap("remove_host", {"type": "object", "properties": {"host": _FQDN}, "required": ["host"],
                                    "additionalProperties": False})
_METADATA = {"type": "object", "patternProperties": {
    "^[a-zA-Z0-9-_:. ]{1,255}$": {"type": ["string", "null"], "maxLength": 255}}, "additionalProperties": False}
SET_METADATA = _wrap("set_metadata", {"type": "object", "properties": {"metadata": _METADATA},
                                      "required": ["metadata"], "additionalProperties": False})
IMAGES = {"type": "object", "properties": {"cache": {"type": "array", "minItems": 1, "items": {
    "type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"],
    "additionalProperties": False}}}, "required": ["cache"], "additionalProperties": False}
_LENIENT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
QUERY = {"2.0-2.101": _LENIENT, "2.102-": dict(_LENIENT, additionalProperties=False)}


def _id(aggregate_id: str) -> int:
    try:
        return strutils.validate_integer(aggregate_id, "id")  # type: ignore[arg-type]  # (what int() takes)
    except ValueError as exc:
        raise faults.BadRequest(f"Invalid input received: {exc}") from None


def _answer(work):
    try:
        return work()
    except store.Refused as exc:
        raise faults.Fault(exc.message, exc.status) from None


@operation(query=QUERY)
def index(req):
    common.can(req, rules.AGGREGATES % "index", {})
    with common.read(req) as conn:
        found = store.listed(conn)
    return {"aggregates": [store.view(a, req.version) for a in found]}


@operation(body=CREATE, expected=(400, 409))
def create(req):
    common.can(req, rules.AGGREGATES % "create", {})
    body = req.body["aggregate"]
    name = body["name"].strip()
    zone = body.get("availability_zone")
    zone = zone.strip() if zone else zone
    with common.write(req) as conn:
        created = _answer(lambda: store.create(conn, name, zone))
    return {"aggregate": store.view(created, req.version, full=False)}


@operation(query=QUERY, expected=(400, 404))
@wsgi_path_params
def show(req, aggregate_id):
    common.can(req, rules.AGGREGATES % "show", {})
    number = _id(aggregate_id)
    with common.read(req) as conn:
        found = _answer(lambda: store.get(conn, number))
    return {"aggregate": store.view(found, req.version)}


@operation(body=UPDATE, expected=(400, 404, 409))
@wsgi_path_params
def update(req, aggregate_id):
    common.can(req, rules.AGGREGATES % "update", {})
    values = dict(req.body["aggregate"])
    if "name" in values:
        values["name"] = values["name"].strip()
    number = _id(aggregate_id)
    with common.write(req) as conn:
        updated = _answer(lambda: store.update_aggregate(conn, number, values))
    return {"aggregate": store.view(updated, req.version)}


@operation(expected=(400, 404))
@wsgi_path_params
def delete(req, aggregate_id):
    common.can(req, rules.AGGREGATES % "delete", {})
    number = _id(aggregate_id)
    with common.write(req) as conn:
        _answer(lambda: store.destroy(conn, number))
    return Response(None)


@operation(body={"2.0-": ADD_HOST}, expected=(400, 404, 409))
@wsgi_path_params
def add_host(req, aggregate_id):
    host = req.body["add_host"]["host"]
    common.can(req, rules.AGGREGATES % "add_host", {})
    number = _id(aggregate_id)
    with common.write(req) as conn:
        if services_db.by_host(conn, host) is None:
            raise faults.NotFound(f"Compute host {host} could not be found.")
        changed = _answer(lambda: store.add_host(conn, number, host))
    return {"aggregate": store.view(changed, req.version)}


@operation(body={"2.0-": REMOVE_HOST}, expected=(400, 404, 409))
@wsgi_path_params
def remove_host(req, aggregate_id):
    host = req.body["remove_host"]["host"]
    common.can(req, rules.AGGREGATES % "remove_host", {})
    number = _id(aggregate_id)
    with common.write(req) as conn:
        if services_db.by_host(conn, host) is None:
            raise faults.NotFound(f"Cannot remove host {host} in aggregate {aggregate_id}")
        try:
            changed = store.remove_host(conn, number, host)
        except store.Refused as exc:
            if exc.status == 404:
                raise faults.NotFound(f"Cannot remove host {host} in aggregate {aggregate_id}") from None
            raise faults.Fault(exc.message, exc.status) from None
    return {"aggregate": store.view(changed, req.version)}


@operation(body={"2.0-": SET_METADATA}, expected=(400, 404))
@wsgi_path_params
def set_metadata(req, aggregate_id):
    common.can(req, rules.AGGREGATES % "set_metadata", {})
    number = _id(aggregate_id)
    metadata = req.body["set_metadata"]["metadata"]
    with common.write(req) as conn:
        changed = _answer(lambda: store.update_metadata(conn, number, metadata))
    return {"aggregate": store.view(changed, req.version)}


@operation(versions="2.81-", body={"2.81-": IMAGES}, success=202, expected=(400, 404))
@wsgi_path_params
def images(req, aggregate_id):
    common.can(req, rules.AGGREGATE_IMAGES % "images", {})
    number = _id(aggregate_id)
    wanted = [image["id"] for image in req.body["cache"]]
    if len(set(wanted)) != len(wanted):
        raise faults.BadRequest("Duplicate images in request")
    with common.read(req) as conn:
        _answer(lambda: store.get(conn, number))
    return Response(None, status=202)
