"""/flavors/{flavor_id}/os-extra_specs[/{key}]: list, create or update, show, update one, delete."""

from __future__ import annotations

from oslo_utils import strutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import flavor_extra_specs as schema
from openkeel_compute.api.schemas import flavors as flavor_schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.policies import flavors as rules

_QUERY = {"2.1-2.101": flavor_schema.LENIENT_QUERY, "2.102-": flavor_schema.STRICT_QUERY}


def _check_values(req, specs: dict) -> dict[str, str]:
    """Numbers are stored as strings (<= 255 characters); from 2.86 values meet the registry."""
    validating = req.version >= (2, 86)
    if validating:
        # Loaded on first use: the 525-validator registry is not needed to start the API.
        from openkeel_compute import extra_specs
    stored = {}
    for name, value in specs.items():
        if isinstance(value, (int, float)):
            value = str(value)
            try:
                strutils.check_string_length(value, "extra_specs value", max_length=255)
            except (ValueError, TypeError) as exc:
                raise faults.BadRequest(exc.args[0]) from None
        if validating:
            try:
                extra_specs.validate(name, value)
            except extra_specs.InvalidExtraSpec as exc:
                raise faults.BadRequest(exc.message) from None
        stored[name] = value
    return stored


def _notify_update(req, flavor_id: str) -> None:
    if common.services(req).notifier is None:
        return
    with common.read(req) as conn:
        flavor = catalog.get_or_none(conn, flavor_id)
        if flavor is None:
            return
        flavor["extra_specs"] = catalog.extra_specs_of(conn, [flavor["id"]])[flavor["id"]]
        flavor["projects"] = catalog.projects_of(conn, flavor["id"])
    common.notify(req, "update", flavor)


@operation(versions="2.0-", query=_QUERY, expected=(404,))
@wsgi_path_params
def index(req, flavor_id):
    common.can(req, rules.EXTRA_SPECS % "index", {"project_id": req.context.project_id})
    with common.read(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        specs = catalog.extra_specs_of(conn, [flavor["id"]])[flavor["id"]]
    return {"extra_specs": specs}


@operation(versions="2.0-", body={"2.0-": schema.create}, expected=(400, 404, 409))
@wsgi_path_params
def create(req, flavor_id):
    common.can(req, rules.EXTRA_SPECS % "create", {})
    specs = req.body["extra_specs"]
    stored = _check_values(req, specs)
    with common.write(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        catalog.set_extra_specs(conn, flavor, stored)
    if stored:
        _notify_update(req, flavor_id)
    return req.body


@operation(versions="2.0-", body={"2.0-": schema.update}, expected=(400, 404, 409))
@wsgi_path_params
def update(req, flavor_id, key):
    common.can(req, rules.EXTRA_SPECS % "update", {})
    stored = _check_values(req, req.body)
    if key not in req.body:
        raise faults.BadRequest("Request body and URI mismatch")
    with common.write(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        catalog.set_extra_specs(conn, flavor, stored)
    _notify_update(req, flavor_id)
    return req.body


@operation(versions="2.0-", query=_QUERY, expected=(404,))
@wsgi_path_params
def show(req, flavor_id, key):
    common.can(req, rules.EXTRA_SPECS % "show", {"project_id": req.context.project_id})
    with common.read(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        specs = catalog.extra_specs_of(conn, [flavor["id"]])[flavor["id"]]
    if key not in specs:
        raise faults.NotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")
    return {key: specs[key]}


@operation(versions="2.0-", expected=(404,))
@wsgi_path_params
def delete(req, flavor_id, key):
    common.can(req, rules.EXTRA_SPECS % "delete", {})
    with common.write(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        catalog.delete_extra_spec(conn, flavor, key)
    _notify_update(req, flavor_id)
    return Response(None)
