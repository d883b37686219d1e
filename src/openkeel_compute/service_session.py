"""A keystoneauth session from a configuration group: what the clients of the services OpenKeel calls share.

Each client of another OpenStack service (Glance in images/glance.py, Neutron in network/client.py,
Placement in placement/client.py, Keystone in api/identity.py, the image import's service token in
controller/images.py) reads its group as Nova's clients read theirs, through keystoneauth's loaders:

- the session: the group's session options (``timeout``, ``cafile``, ``certfile``, ``keyfile``,
  ``insecure``, ``collect-timing``, ``split-loggers``), one per client and process, its connection pool
  shared by every call (keystoneauth's sessions are thread-safe);
- the group's own credential: its auth plugin options (``auth_type`` and the plugin's, e.g. ``password``
  with ``auth_url``, ``username``, ...), loaded once when first asked for; None when the group names no
  ``auth_type``;
- an adapter for one identity on that session: the group's adapter options (``service_type``,
  ``valid_interfaces``, ``region_name``, ``endpoint_override``, retries), answers never raised for their
  status (each client turns them into its own errors);
- who a call is made as when it is made for a caller: ``caller_auth`` (the caller's own token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import plugin as ks_plugin
from oslo_config import cfg


class ConfSession:
    """The keystoneauth session of one configuration group, its credential and its adapters."""

    def __init__(self, conf: cfg.ConfigOpts, group: str, *, authenticated: bool = False) -> None:
        """``authenticated``: the session itself carries the group's credential (a client that only ever
        calls as itself, Placement); otherwise each adapter names who it calls as."""
        self.conf = conf
        self.group = group
        self._credential: ks_plugin.BaseAuthPlugin | None = None
        self._credential_loaded = False
        auth = self.credential() if authenticated else None
        self.session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)

    def credential(self) -> ks_plugin.BaseAuthPlugin | None:
        """The group's own auth plugin, loaded once (None: the group names no ``auth_type``)."""
        if not self._credential_loaded:
            self._credential = ks_loading.load_auth_from_conf_options(self.conf, self.group)
            self._credential_loaded = True
        return self._credential

    def adapter(self, auth: ks_plugin.BaseAuthPlugin | None, *, endpoint_override: str | None = None,
                **kwargs: Any) -> ks_adapter.Adapter:
        """An adapter of the group's options on the session, calling as ``auth`` (``endpoint_override``:
        this endpoint instead of the group's or the catalog's; ``kwargs``: more adapter arguments, e.g. the
        API versions). Answers are returned whatever their status."""
        made = ks_loading.load_adapter_from_conf_options(self.conf, self.group, session=self.session, auth=auth,
                                                         raise_exc=False, **kwargs)
        if endpoint_override is not None:
            made.endpoint_override = endpoint_override
        return made


def caller_auth(context: Any, environ: Mapping[str, Any] | None) -> ks_plugin.BaseAuthPlugin | None:
    """The caller's credentials as a keystoneauth plugin: the one keystonemiddleware's auth_token left in
    the WSGI environ (``keystone.token_auth``), else the request's token and its X-Service-Catalog header
    (caller_auth.HeaderCatalogAuth); None when the caller has neither (noauth2 without a token)."""
    environ = environ or getattr(context, "environ", None) or {}
    plugin: ks_plugin.BaseAuthPlugin | None = environ.get("keystone.token_auth")
    if plugin is not None:
        return plugin
    token = getattr(context, "auth_token", None)
    catalog = environ.get("HTTP_X_SERVICE_CATALOG")
    if not token and not catalog:
        return None
    from openkeel_compute.caller_auth import HeaderCatalogAuth

    return HeaderCatalogAuth(token, catalog)
