"""A Neutron v2.0 client over keystoneauth, configured by Nova's ``[neutron]`` options (conf/neutron.py).

Who each call is made as, as Nova's ``get_client(context, admin=...)`` decides:

- ``for_caller(context, environ)``: the caller's own token (keystonemiddleware's plugin in the WSGI
  environ, or the token and X-Service-Catalog headers), wrapped with the ``[service_user]`` token
  (X-Service-Token) when ``[service_user] send_service_user_token`` is true. A caller without any
  token (noauth2) is served with the ``[neutron]`` credential, as Nova serves an admin context
  without a token.
- ``admin()``: the ``[neutron]`` credential (what Nova's compute uses to bind ports).

Where Neutron is: ``[neutron] endpoint_override``, else the token's catalog (service type
``network``, interfaces ``valid_interfaces``, ``region_name``). A refused connection is retried
``[neutron] http_retries`` times. Unreachable, or a 5xx answer: NeutronUnavailable; 401:
Unauthorized; any other refusal: NeutronError with Neutron's message.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from openkeel_compute.conf import neutron as neutron_conf
from openkeel_compute.network import errors
from openkeel_compute.service_session import ConfSession, caller_auth

LOG = logging.getLogger(__name__)
GROUP = neutron_conf.GROUP


def neutron_message(resp) -> tuple[str, str | None]:
    """(message, type) of a Neutron error body ({"NeutronError": {"type", "message", "detail"}})."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300], None
    error = body.get("NeutronError") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or ""), error.get("type")
    if isinstance(body, dict) and "message" in body:
        return str(body["message"]), None
    return resp.text[:300], None


def client_text(resp, message: str) -> str:
    """The text of the neutronclient exception Nova turns a Neutron refusal into (what Nova shows where
    it passes ``str(e)`` on): Neutron's message, its detail on the next line, then the request id
    Neutron answered with ("Neutron server returns request_ids: ['req-…']")."""
    text = message
    try:
        body = resp.json()
    except ValueError:
        body = None
    error = body.get("NeutronError") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("detail"):
        text += "\n" + str(error["detail"])
    request_id = resp.headers.get("x-openstack-request-id")
    if request_id:
        text += f"\nNeutron server returns request_ids: {[request_id]!r}"
    return text


def _q(ident: str) -> str:
    return urllib.parse.quote(ident, safe="")


class NeutronClient:
    """Neutron for one OpenKeel process (thread-safe: one keystoneauth session, its pool shared)."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        neutron_conf.register_neutron_opts(conf)
        self.keystone = ConfSession(conf, GROUP)
        self.session = self.keystone.session
        self._service_auth = None
        self._service_loaded = False

    # -- credentials ---------------------------------------------------------------------------
    def _admin_plugin(self):
        return self.keystone.credential()

    def _service_plugin(self):
        if not self._service_loaded:
            from openkeel_compute.conf import service_user

            service_user.register_opts(self.conf)
            group = self.conf[service_user.SERVICE_USER]
            if group.send_service_user_token and group.auth_type:
                self._service_auth = ConfSession(self.conf, service_user.SERVICE_USER).credential()
            self._service_loaded = True
        return self._service_auth

    def for_caller(self, context, environ=None) -> Calls:
        auth = caller_auth(context, environ)
        if auth is None:
            return self.admin()
        service = self._service_plugin()
        if service is not None:
            from keystoneauth1 import service_token

            auth = service_token.ServiceTokenAuthWrapper(user_auth=auth, service_auth=service)
        return Calls(self, auth, admin=bool(getattr(context, "is_admin", False)))

    def admin(self) -> Calls:
        return Calls(self, self._admin_plugin(), admin=True)


class Calls:
    """The Neutron calls Nova's API makes, as one identity."""

    def __init__(self, client: NeutronClient, auth, admin: bool) -> None:
        self.client = client
        self.auth = auth
        self.admin = admin
        self.adapter = client.keystone.adapter(auth)

    def request(self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None,
                ok: tuple[int, ...] = (200,)):
        url = "/v2.0" + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        kwargs: dict[str, Any] = {"headers": {"Accept": "application/json"}}
        if body is not None:
            kwargs["json"] = body
        retries = self.client.conf.neutron.http_retries
        try:
            resp = self.adapter.request(url, method, connect_retries=retries, **kwargs)
        except ks_exc.EndpointNotFound as exc:
            raise errors.NeutronUnavailable(f"Neutron has no endpoint in the catalog: {exc}") from None
        except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.RetriableConnectionFailure,
                ks_exc.UnknownConnectionError, ks_exc.SSLError, ks_exc.DiscoveryFailure) as exc:
            raise errors.NeutronUnavailable(f"Neutron is unreachable: {exc}") from None
        except ks_exc.Unauthorized:
            raise errors.Unauthorized() from None
        except ks_exc.ClientException as exc:
            raise errors.NeutronUnavailable(f"Neutron cannot be used: {exc}") from None
        if resp.status_code in ok:
            return resp.json() if resp.content else None
        message, kind = neutron_message(resp)
        if resp.status_code == 401:
            LOG.warning("Neutron refused the %s credential: %s", "[neutron]" if self.admin else "caller's", message)
            raise errors.Unauthorized()
        if resp.status_code >= 500:
            raise errors.NeutronUnavailable(f"Neutron answered {resp.status_code} to {method} {path}: {message}")
        raise errors.NeutronError(message, resp.status_code, kind, text=client_text(resp, message))

    # -- reads ---------------------------------------------------------------------------------
    def list_networks(self, **params) -> list[dict]:
        return self.request("GET", "/networks", params)["networks"]

    def show_network(self, network_id: str) -> dict:
        """The network; NetworkNotFound when Neutron does not show it to this caller."""
        try:
            return self.request("GET", f"/networks/{urllib.parse.quote(network_id, safe='')}")["network"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                raise errors.NetworkNotFound(network_id) from None
            raise

    def show_port(self, port_id: str) -> dict:
        """The port; PortNotFound when Neutron does not know it, as Nova's ``_show_port``."""
        try:
            return self.request("GET", f"/ports/{urllib.parse.quote(port_id, safe='')}")["port"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                raise errors.PortNotFound(port_id) from None
            if exc.status == 403:
                raise errors.NeutronError("Forbidden", 403) from None
            raise errors.NeutronError(f"Failed to access port {port_id}: {exc.message}", exc.status) from None

    def list_ports(self, **params) -> list[dict]:
        return self.request("GET", "/ports", params)["ports"]

    def show_quota(self, project_id: str) -> dict:
        return self.request("GET", f"/quotas/{urllib.parse.quote(project_id, safe='')}")["quota"]

    def list_extensions(self) -> list[dict]:
        return self.request("GET", "/extensions")["extensions"]

    def list_security_groups(self, **params) -> list[dict]:
        return self.request("GET", "/security-groups", params)["security_groups"]

    def show_security_group(self, group_id: str) -> dict:
        """The group; SecurityGroupNotFound (Neutron's words) when the caller cannot see it."""
        try:
            return self.request("GET", f"/security-groups/{urllib.parse.quote(group_id, safe='')}")["security_group"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                raise errors.SecurityGroupNotFound(exc.text) from None
            raise

    def list_floating_ips(self, **params) -> list[dict]:
        """The floating IPs; none when Neutron has no L3 API (404), as Nova reads it."""
        try:
            return self.request("GET", "/floatingips", params)["floatingips"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                return []
            raise

    def show_floating_ip(self, fip_id: str) -> dict | None:
        """The floating IP, or None when Neutron does not show it."""
        try:
            return self.request("GET", f"/floatingips/{urllib.parse.quote(fip_id, safe='')}")["floatingip"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                return None
            raise

    def list_subnets(self, **params) -> list[dict]:
        return self.request("GET", "/subnets", params)["subnets"]

    def show_security_group_rule(self, rule_id: str) -> dict:
        return self.request("GET", f"/security-group-rules/{_q(rule_id)}")["security_group_rule"]

    # -- writes (Nova's proxies, as the caller) --------------------------------------------------
    def create_security_group(self, name: str, description: str) -> dict:
        body = {"security_group": {"name": name, "description": description}}
        return self.request("POST", "/security-groups", body=body, ok=(201,))["security_group"]

    def update_security_group(self, group_id: str, name: str, description: str) -> dict:
        body = {"security_group": {"name": name, "description": description}}
        return self.request("PUT", f"/security-groups/{_q(group_id)}", body=body)["security_group"]

    def delete_security_group(self, group_id: str) -> None:
        self.request("DELETE", f"/security-groups/{_q(group_id)}", ok=(204,))

    def create_security_group_rules(self, rules: list[dict]) -> list[dict]:
        """Neutron's bulk create, as Nova sends even one rule."""
        body = {"security_group_rules": rules}
        return self.request("POST", "/security-group-rules", body=body, ok=(201,))["security_group_rules"]

    def delete_security_group_rule(self, rule_id: str) -> None:
        self.request("DELETE", f"/security-group-rules/{_q(rule_id)}", ok=(204,))

    def create_floating_ip(self, network_id: str) -> dict:
        body = {"floatingip": {"floating_network_id": network_id}}
        return self.request("POST", "/floatingips", body=body, ok=(201,))["floatingip"]

    def update_floating_ip(self, fip_id: str, fields: dict) -> dict:
        return self.request("PUT", f"/floatingips/{_q(fip_id)}", body={"floatingip": fields})["floatingip"]

    def delete_floating_ip(self, fip_id: str) -> None:
        self.request("DELETE", f"/floatingips/{_q(fip_id)}", ok=(204,))

    def validate_auto_allocated_topology(self, project_id: str) -> None:
        """Neutron's dry run of the auto-allocated topology: NeutronError 409 when it cannot be made."""
        self.request("GET", f"/auto-allocated-topology/{urllib.parse.quote(project_id, safe='')}",
                     {"fields": "dry-run"})

    # -- the controller's writes (the [neutron] credential, as Nova's compute binds ports) ---------------
    def create_port(self, body: dict) -> dict:
        """POST /ports: the port Neutron made. Neutron's refusals keep their type (OverQuota,
        IpAddressGenerationFailure, IpAddressAlreadyAllocated, ...) for Nova's words."""
        return self.request("POST", "/ports", body={"port": body}, ok=(201,))["port"]

    def update_port(self, port_id: str, body: dict) -> dict:
        """PUT /ports/{id}; PortNotFound when the port is gone."""
        try:
            return self.request("PUT", f"/ports/{_q(port_id)}", body={"port": body})["port"]
        except errors.NeutronError as exc:
            if exc.status == 404:
                raise errors.PortNotFound(port_id) from None
            raise

    def delete_port(self, port_id: str) -> None:
        """DELETE /ports/{id}; a port already gone is what was wanted."""
        self.request("DELETE", f"/ports/{_q(port_id)}", ok=(204, 404))
