"""/os-services: each cluster node is a ``nova-compute`` service, as Nova 34.0.0 answers at every
microversion.

The controller creates a service per node and records its heartbeat while the node is Ready
(compute/compute_services.py says when a service is up). Disabling a service cordons its node and
enabling uncordons it (the controller does it; the reason stays on the node as the
``openkeel.io/disabled-reason`` annotation); ``forced_down`` (2.11) marks the service down for
evacuation without touching the node. No ``nova-conductor`` or ``nova-scheduler`` entry is listed: the
controller is neither, and Nova's clients (the CLI, Masakari) look up ``nova-compute`` services only.
"""

from __future__ import annotations

from typing import Any

from oslo_utils import strutils, uuidutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import aggregates
from openkeel_compute.compute import compute_services as services_db
from openkeel_compute.policies import operator as rules

COMPUTE = "nova-compute"
_QUERY_PARAM = {"type": "array", "items": {"type": "string"}}
_index_query = {"type": "object", "properties": {"host": _QUERY_PARAM, "binary": _QUERY_PARAM},
                "additionalProperties": True}
INDEX_QUERY = {"2.0-2.74": _index_query, "2.75-": dict(_index_query, additionalProperties=False)}

_FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 255}
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes",
                                                    "yes", False, "False", "FALSE", "false", "0", "OFF", "Off", "off",
                                                    "NO", "No", "no"]}
_update: dict[str, Any] = {"type": "object", "properties": {"host": _FQDN, "binary": _TEXT, "disabled_reason": _TEXT},
           "required": ["host", "binary"], "additionalProperties": False}
_update_v211 = dict(_update, properties=dict(_update["properties"], forced_down=_BOOLEAN))
_update_v253 = {"type": "object", "properties": {"status": {"type": "string", "enum": ["enabled", "disabled"]},
                                                 "disabled_reason": _TEXT, "forced_down": _BOOLEAN},
                "additionalProperties": False}
UPDATE = {"2.0-2.10": _update, "2.11-2.52": _update_v211, "2.53-": _update_v253}


def _time(value):
    return value.isoformat() if value is not None else None


def detail(req, row, *, forced_down: bool) -> dict:
    conf = common.services(req).conf
    body = {"binary": row.binary, "host": row.host, "id": row.uuid if req.version >= (2, 53) else row.id,
            "zone": row.zone or conf.default_availability_zone,
            "status": "disabled" if row.disabled else "enabled",
            "state": "up" if services_db.is_up(row, conf.service_down_time) else "down",
            "updated_at": _time(services_db.updated_time(row)), "disabled_reason": row.disabled_reason}
    if forced_down:
        body["forced_down"] = bool(row.forced_down)
    return body


def _last(req, name: str) -> str:
    values = req.query.get(name)
    return values[-1] if values else ""


@operation(query=INDEX_QUERY)
def index(req):
    common.can(req, rules.SERVICES % "list", {})
    with common.read(req) as conn:
        rows = services_db.listed(conn, _last(req, "host") or None, _last(req, "binary") or None)
    return {"services": [detail(req, row, forced_down=req.version >= (2, 11)) for row in rows]}


def _not_compute(binary: str) -> faults.BadRequest:
    return faults.BadRequest(f"Updating a {binary} service is not supported. Only nova-compute services can be "
                             "updated.")


def _update_by_host(req, host: str, binary: str, values: dict) -> None:
    if binary != COMPUTE:
        raise _not_compute(binary)
    with common.write(req) as conn:
        if services_db.by_host(conn, host) is None:
            raise faults.NotFound(f"Host '{host}' is not mapped to any cell")
        if values.get("forced_down") is False:
            _check_for_evacuations(conn, host)
        services_db.set_fields(conn, host, values)


def _check_for_evacuations(conn, host: str) -> None:
    if services_db.done_evacuations(conn, host):
        raise faults.BadRequest(
            f"Unable to force up host {host} as `done` evacuation migration records remain associated with the "
            "host. Ensure the compute service has been restarted, allowing these records to move to `completed` "
            "before retrying this request.")


def _enable_disable(req, body: dict, status: str, reason: str | None) -> dict:
    result = {"host": body["host"], "binary": body["binary"], "status": status}
    if reason:
        result["disabled_reason"] = reason
    _update_by_host(req, body["host"], body["binary"],
                    {"disabled": status == "disabled", "disabled_reason": reason})
    return {"service": result}


def _action_v21(req, action: str, body: dict) -> dict:
    if action == "enable":
        return _enable_disable(req, body, "enabled", None)
    if action == "disable":
        return _enable_disable(req, body, "disabled", None)
    if action == "disable-log-reason":
        if "disabled_reason" not in body:
            raise faults.BadRequest("Missing disabled reason field")
        return _enable_disable(req, body, "disabled", body["disabled_reason"])
    if action == "force-down" and req.version >= (2, 11):
        if "forced_down" not in body:
            raise faults.BadRequest("Missing forced_down field")
        forced = strutils.bool_from_string(body["forced_down"])
        _update_by_host(req, body["host"], body["binary"], {"forced_down": forced})
        return {"service": {"host": body["host"], "binary": body["binary"], "forced_down": forced}}
    raise faults.NotFound("Unknown action")


@operation(body=UPDATE, expected=(400, 404))
@wsgi_path_params
def update(req, service_id):
    body = req.body
    if req.version < (2, 53):
        common.can(req, rules.SERVICES % "update", {})
        return _action_v21(req, service_id, body)
    if not uuidutils.is_uuid_like(service_id):
        raise faults.BadRequest(f"Invalid uuid {service_id}")
    common.can(req, rules.SERVICES % "update", {})
    with common.write(req) as conn:
        row = services_db.by_id(conn, service_id, uuid=True)
        if row is None:
            raise faults.NotFound(f"Service {service_id} could not be found.")
        if row.binary != COMPUTE:
            raise _not_compute(row.binary)
        values: dict = {}
        if "status" in body:
            if body["status"] == "enabled":
                if body.get("disabled_reason"):
                    raise faults.BadRequest("Specifying 'disabled_reason' with status 'enabled' is invalid.")
                values.update(disabled=False, disabled_reason=None)
            else:
                values.update(disabled=True, disabled_reason=body.get("disabled_reason"))
        if "forced_down" in body:
            values["forced_down"] = strutils.bool_from_string(body["forced_down"], strict=True)
            if values["forced_down"] is False:
                _check_for_evacuations(conn, row.host)
        changed = {k: v for k, v in values.items() if getattr(row, k) != v}
        if not changed:
            raise faults.BadRequest("No updates were requested. Fields 'status' or 'forced_down' should be "
                                    "specified.")
        services_db.set_fields(conn, row.host, changed)
        row = services_db.by_id(conn, service_id, uuid=True)
    return {"service": detail(req, row, forced_down=True)}


@operation(success=204, expected=(400, 404, 409))
@wsgi_path_params
def delete(req, service_id):
    common.can(req, rules.SERVICES % "delete", {})
    by_uuid = req.version >= (2, 53)
    if by_uuid:
        if not uuidutils.is_uuid_like(service_id):
            raise faults.BadRequest(f"Invalid uuid {service_id}")
    else:
        try:
            strutils.validate_integer(service_id, "id")
        except ValueError:
            raise faults.BadRequest("Invalid input received: id must be an integer") from None
    with common.write(req) as conn:
        row = services_db.by_id(conn, service_id, uuid=by_uuid)
        if row is None:
            raise faults.NotFound(f"Service {service_id} not found.")
        if row.binary == COMPUTE:
            if services_db.instances_on(conn, row.host):
                raise faults.Conflict("Unable to delete compute service that is hosting instances. Migrate or "
                                      "delete the instances first.")
            if services_db.migrations_on(conn, row.host):
                raise faults.Conflict("Unable to delete compute service that has in-progress migrations. "
                                      "Complete the migrations or delete the instances first.")
            aggregates.remove_host_everywhere(conn, row.host)  # as Nova's delete takes it out of them
        services_db.destroy(conn, row.id)
    return Response(None)
