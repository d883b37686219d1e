"""Where the cluster fetches a server's image, and the service token it sends.

The root disk of a server is imported by CDI straight from Glance (``<glance>/v2/images/<id>/file``).
Glance wants a token; a user's token would expire during a long import, so the controller sends a
service credential: keystoneauth's auth options in ``[service_user]`` (as Nova's ``[service_user]``),
in a Secret the DataVolume names in ``secretExtraHeaders``. With no ``[service_user] auth_type``
(``[api] auth_strategy = noauth2``, or the local image service) no token is sent and no Secret written.

Glance's URL is found as the API finds it (``[glance] api_servers``, ``endpoint_override`` or the
catalog of the service credential), through ``images.glance.GlanceClient``.
"""

from __future__ import annotations

import logging
from typing import Any

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from openkeel_compute.conf import groups

LOG = logging.getLogger(__name__)
SERVICE_USER = "service_user"
SERVICE_USER_GROUP = cfg.OptGroup(
    SERVICE_USER, title="Service credential",
    help="The credential the controller uses towards the image service: the token the cluster's image "
         "importer sends to Glance. Leave auth_type unset when Glance needs no token (noauth2, or the local "
         "image service).")


def register_opts(conf: cfg.ConfigOpts) -> None:
    if SERVICE_USER in conf and "auth_type" in conf[SERVICE_USER]:
        return
    conf.register_group(groups.own(SERVICE_USER_GROUP))
    ks_loading.register_session_conf_options(conf, SERVICE_USER)
    ks_loading.register_auth_conf_options(conf, SERVICE_USER)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(SERVICE_USER_GROUP, ks_loading.get_session_conf_options() + ks_loading.get_auth_common_conf_options()
             + ks_loading.get_auth_plugin_conf_options("password"))]


class ImageAccess:
    """The image service as the cluster reaches it: its URL and, when configured, a service token."""

    def __init__(self, conf: cfg.ConfigOpts | None = None, *, endpoint: str | None = None, auth: Any = None,
                 session: Any = None) -> None:
        self.conf = conf
        self._endpoint = endpoint
        self.auth = auth
        self.session = session

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> ImageAccess:
        register_opts(conf)
        auth = ks_loading.load_auth_from_conf_options(conf, SERVICE_USER)  # None without auth_type
        session = ks_loading.load_session_from_conf_options(conf, SERVICE_USER, auth=auth) if auth else None
        if auth is None:
            LOG.info("[service_user] has no auth_type: images are imported without a token")
        return cls(conf, auth=auth, session=session)

    def endpoint(self) -> str:
        """Glance's root URL, as the API finds it (raises ImageServiceUnavailable when it cannot)."""
        if self._endpoint is None:
            from openkeel_compute.images.glance import GlanceClient

            environ = {"keystone.token_auth": self.auth} if self.auth is not None else {}
            self._endpoint = GlanceClient(self.conf).endpoint(None, environ)
        return self._endpoint

    def token(self) -> str | None:
        """A valid service token (keystoneauth renews it before it expires), or None without a credential."""
        if self.auth is None:
            return None
        return self.session.get_token()


__all__ = ["ImageAccess", "list_opts", "register_opts"]
