"""GET /flavors/{flavor_id}/os-flavor-access and the addTenantAccess / removeTenantAccess actions."""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import flavor_access as schema
from openkeel_compute.api.schemas import flavors as flavor_schema
from openkeel_compute.api.wsgi import operation
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.policies import flavors as rules


def _marshall(flavor: dict, projects: list[str]) -> dict:
    return {"flavor_access": [{"flavor_id": flavor["flavorid"], "tenant_id": p} for p in projects]}


def _verify_project(req, project_id: str) -> None:
    verify = common.services(req).verify_project
    if verify is not None:
        verify(req.context, project_id, req.environ)


def _notify_update(req, flavor: dict, projects: list[str]) -> None:
    if common.services(req).notifier is None:
        return
    with common.read(req) as conn:
        flavor = dict(flavor, extra_specs=catalog.extra_specs_of(conn, [flavor["id"]])[flavor["id"]],
                      projects=projects)
    common.notify(req, "update", flavor)


@operation(versions="2.0-", query={"2.1-2.101": flavor_schema.LENIENT_QUERY, "2.102-": flavor_schema.STRICT_QUERY},
           expected=(404,))
@wsgi_path_params
def index(req, flavor_id):
    common.can(req, rules.ACCESS)
    with common.read_one(req) as conn:
        flavor, projects = catalog.access_list(conn, flavor_id, common.caller(req))
    if flavor["is_public"]:
        raise faults.NotFound("Access list not available for public flavors.")
    return _marshall(flavor, projects)


@operation(body={"2.0-": schema.add_tenant_access}, expected=(400, 403, 404, 409))
@wsgi_path_params
def add_tenant_access(req, flavor_id):
    common.can(req, rules.ACCESS_ADD, {})
    tenant = req.body["addTenantAccess"]["tenant"]
    _verify_project(req, tenant)
    with common.write(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        if req.version >= (2, 7) and flavor["is_public"]:
            raise faults.Conflict("Can not add access to a public flavor.")
        projects = catalog.add_access(conn, flavor, tenant)
    _notify_update(req, flavor, projects)
    return _marshall(flavor, projects)


@operation(body={"2.0-": schema.remove_tenant_access}, expected=(400, 403, 404))
@wsgi_path_params
def remove_tenant_access(req, flavor_id):
    common.can(req, rules.ACCESS_REMOVE, {})
    tenant = req.body["removeTenantAccess"]["tenant"]
    try:
        _verify_project(req, tenant)
    except faults.BadRequest as exc:
        # Removing access of a project Keystone no longer knows is allowed (clean-up).
        if f"Project ID {tenant} is not a valid project." not in exc.message:
            raise
    with common.write(req) as conn:
        flavor = catalog.get(conn, flavor_id, common.caller(req))
        projects = catalog.remove_access(conn, flavor, tenant)
    _notify_update(req, flavor, projects)
    return _marshall(flavor, projects)
