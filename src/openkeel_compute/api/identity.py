"""Keystone project checks for flavor access, as Nova makes them.

``GET /projects/{id}`` on the identity v3 API with the caller's own token: 404 → 400 "Project ID
… is not a valid project."; 403 or any other answer → accepted (logged); Keystone unreachable →
accepted ("Unable to contact keystone to verify project_id"); no identity endpoint → 400 "Nova
was unable to find Keystone service endpoint.".

Where the identity endpoint comes from, in Nova's order:

- ``[keystone] endpoint_override`` when it is set;
- else the caller's token's service catalog: the auth plugin keystonemiddleware's auth_token
  leaves in ``keystone.token_auth`` (what Nova uses), or, when no such plugin is there, the
  catalog in the X-Service-Catalog header, in either format keystoneauth reads (v2 with
  ``publicURL``/``internalURL``/``adminURL``, which is what auth_token writes, or v3 with
  ``interface``/``url``).

In the catalog the interfaces of ``[keystone] valid_interfaces`` are tried in order (default
``internal`` then ``public``, as Nova has it), within ``[keystone] region_name`` when set; the
v3 API is then found by version discovery on that endpoint, as keystoneauth does for Nova.
"""

from __future__ import annotations

import logging

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import plugin as ks_plugin
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from openkeel_compute.api import faults
from openkeel_compute.caller_auth import HeaderCatalogAuth, access_from_header
from openkeel_compute.conf.keystone import DEFAULT_VALID_INTERFACES, GROUP, list_opts, register_opts
from openkeel_compute.service_session import ConfSession

LOG = logging.getLogger(__name__)

__all__ = ["DEFAULT_VALID_INTERFACES", "GROUP", "HeaderCatalogAuth", "ProjectVerifier", "access_from_header",
           "list_opts", "make_session", "register_opts"]


class ProjectVerifier:
    def __init__(self, conf: cfg.ConfigOpts):
        self.conf = conf
        register_opts(conf)
        self.keystone = ConfSession(conf, GROUP)
        self.session = self.keystone.session

    @staticmethod
    def auth_for(context, environ) -> ks_plugin.BaseAuthPlugin:
        plugin = environ.get("keystone.token_auth")
        if plugin is not None:
            return plugin
        return HeaderCatalogAuth(getattr(context, "auth_token", None), environ.get("HTTP_X_SERVICE_CATALOG"))

    def __call__(self, context, project_id: str, environ=None) -> None:
        environ = environ or getattr(context, "environ", None) or {}
        adapter = self.keystone.adapter(self.auth_for(context, environ), min_version=(3, 0),
                                        max_version=(3, "latest"))
        try:
            resp = adapter.get(f"/projects/{project_id}")
        except ks_exc.EndpointNotFound:
            LOG.error("Keystone identity service version 3.0 was not found: check the identity entry of the "
                      "token's service catalog, or [keystone] endpoint_override, valid_interfaces and "
                      "region_name.")
            raise faults.BadRequest("Nova was unable to find Keystone service endpoint.") from None
        except ks_exc.ClientException as exc:
            LOG.info("Unable to contact keystone to verify project_id (%s)", exc)
            return
        if resp.ok:
            return
        if resp.status_code == 404:
            raise faults.BadRequest(f"Project ID {project_id} is not a valid project.")
        if resp.status_code == 403:
            LOG.info("Insufficient permissions for user %s to verify existence of project_id %s",
                     context.user_id, project_id)
            return
        LOG.warning("Unexpected response from keystone trying to verify project_id %s - resp: %s %s",
                    project_id, resp.status_code, resp.content)


def make_session(conf) -> ks_session.Session:  # pragma: no cover - convenience for tools
    return ConfSession(conf, GROUP).session
