"""Keystone project checks for flavor access, as Nova makes them.

``GET /v3/projects/{id}`` with the caller's own token: 404 → 400 "Project ID … is not a valid
project."; 403 or any other answer → accepted (logged); Keystone unreachable → accepted
("Unable to contact keystone to verify project_id"); no identity endpoint → 400 "Nova was
unable to find Keystone service endpoint.". The endpoint comes from [keystone]
endpoint_override, else the token's service catalog (identity, public interface).
"""

from __future__ import annotations

import json
import logging

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from openkeel_compute.api import faults

LOG = logging.getLogger(__name__)
GROUP = "keystone"


def register_opts(conf: cfg.ConfigOpts) -> None:
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP, include_deprecated=False)
    conf.set_default("service_type", "identity", group=GROUP)


def list_opts():
    return [(GROUP, ks_loading.get_session_conf_options() + ks_loading.get_adapter_conf_options(
        include_deprecated=False))]


def _endpoint_from_catalog(environ, interface: str) -> str | None:
    raw = environ.get("HTTP_X_SERVICE_CATALOG")
    if not raw:
        return None
    try:
        catalog = json.loads(raw)
    except ValueError:
        return None
    for service in catalog:
        if service.get("type") != "identity":
            continue
        for endpoint in service.get("endpoints", []):
            if endpoint.get("interface") == interface:
                return endpoint.get("url")
    return None


class ProjectVerifier:
    def __init__(self, conf: cfg.ConfigOpts):
        self.conf = conf
        register_opts(conf)
        self.session = ks_loading.load_session_from_conf_options(conf, GROUP)

    def _endpoint(self, environ) -> str | None:
        group = self.conf[GROUP]
        if group.endpoint_override:
            return group.endpoint_override
        interfaces = group.valid_interfaces or ["public"]
        for interface in interfaces:
            url = _endpoint_from_catalog(environ, interface)
            if url:
                return url
        return None

    def __call__(self, context, project_id: str, environ=None) -> None:
        environ = environ or getattr(context, "environ", None) or {}
        endpoint = self._endpoint(environ)
        if not endpoint:
            LOG.error("Keystone identity service version 3.0 was not found.")
            raise faults.BadRequest("Nova was unable to find Keystone service endpoint.")
        url = endpoint.rstrip("/")
        if not url.endswith("/v3"):
            url += "/v3"
        headers = {"X-Auth-Token": context.auth_token} if context.auth_token else {}
        try:
            resp = self.session.get(f"{url}/projects/{project_id}", headers=headers, authenticated=False,
                                    raise_exc=False)
        except ks_exc.ClientException:
            LOG.info("Unable to contact keystone to verify project_id")
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
    return ks_loading.load_session_from_conf_options(conf, GROUP)
