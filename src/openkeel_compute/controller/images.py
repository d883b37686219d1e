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

from oslo_config import cfg

from openkeel_compute.conf.service_user import SERVICE_USER, SERVICE_USER_GROUP, list_opts, register_opts
from openkeel_compute.service_session import ConfSession

LOG = logging.getLogger(__name__)

__all__ = ["SERVICE_USER", "SERVICE_USER_GROUP", "ImageAccess", "list_opts", "register_opts"]


class ImageAccess:
    """The image service as the cluster reaches it: its URL and, when configured, a service token."""

    def __init__(self, conf: cfg.ConfigOpts | None = None, *, endpoint: str | None = None, auth: Any = None,
                 session: Any = None) -> None:
        self.conf = conf
        self._endpoint = endpoint
        self.auth = auth
        self.session = session
        self._client: Any = None
        self._sizes: dict[str, dict[str, int]] = {}  # image id -> its size and virtual size (they never change)

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> ImageAccess:
        register_opts(conf)
        keystone = ConfSession(conf, SERVICE_USER, authenticated=True)
        auth = keystone.credential()  # None without auth_type
        session = keystone.session if auth else None
        if auth is None:
            LOG.info("[service_user] has no auth_type: images are imported without a token")
        return cls(conf, auth=auth, session=session)

    def endpoint(self) -> str:
        """Glance's root URL, as the API finds it (raises ImageServiceUnavailable when it cannot)."""
        if self._endpoint is None:
            from openkeel_compute.images.glance import GlanceClient

            environ = {"keystone.token_auth": self.auth} if self.auth is not None else {}
            assert self.conf is not None, "an image access without configuration is given its endpoint"
            self._endpoint = GlanceClient(self.conf).endpoint(None, environ)
        return self._endpoint

    def sizes(self, image_id: str) -> dict[str, int]:
        """The image's ``size`` and ``virtual_size`` (bytes) as the image service reports them, the
        fields it has (Nova reads them from the image service at build, not from what the server keeps).
        Raises ImageNotFound when the image is gone, ImageServiceUnavailable when the service is away."""
        if image_id not in self._sizes:
            if self._client is None:
                from openkeel_compute.images.glance import GlanceClient

                assert self.conf is not None, "an image access without configuration reads no image"
                self._client = GlanceClient(self.conf)
            environ = {"keystone.token_auth": self.auth} if self.auth is not None else {}
            image = self._client.show(None, image_id, environ)
            self._sizes[image_id] = {k: int(image[k]) for k in ("size", "virtual_size") if image.get(k)}
        return dict(self._sizes[image_id])

    def glance(self) -> tuple[Any, dict[str, Any]]:
        """The Glance client and the environ that carries the service credential (snapshots' uploads)."""
        if self._client is None:
            from openkeel_compute.images.glance import GlanceClient

            assert self.conf is not None, "an image access without configuration writes no image"
            self._client = GlanceClient(self.conf)
        return self._client, ({"keystone.token_auth": self.auth} if self.auth is not None else {})

    def token(self) -> str | None:
        """A valid service token (keystoneauth renews it before it expires), or None without a credential."""
        if self.auth is None:
            return None
        return self.session.get_token()


__all__ = ["ImageAccess", "list_opts", "register_opts"]
