"""A Glance v2 client over keystoneauth, with Nova's ``[glance]`` options and error translation.

Each call uses the caller's own token: the keystoneauth plugin keystonemiddleware's auth_token left
in the WSGI environ (``keystone.token_auth``), or, without one, the token and the
``X-Service-Catalog`` header as api/identity.py reads them. Where Glance is, in Nova's order:

- ``[glance] api_servers`` when set (a list; one is picked at random and the next one is tried on a
  retry);
- else ``[glance] endpoint_override``, or the token's catalog (service type ``[glance]
  service_type``, default ``image``; interfaces ``[glance] valid_interfaces``, default internal then
  public; ``[glance] region_name``), with any trailing ``/vN`` taken off as Nova does.

A refused connection, a timeout or a 503 is retried ``[glance] num_retries`` times (default 3) one
second apart, then reported as ImageServiceUnavailable. 404 is ImageNotFound, 401 and 403 are
ImageNotAuthorized, 400 is ImageBadRequest.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import plugin as ks_plugin
from oslo_config import cfg

from openkeel_compute.conf.keystoneauth import client_opts, register_client_opts
from openkeel_compute.images import errors
from openkeel_compute.service_session import ConfSession, caller_auth

LOG = logging.getLogger(__name__)
GROUP = "glance"
SERVICE_TYPE = "image"
DEFAULT_VALID_INTERFACES = ["internal", "public"]

GLANCE_OPTS = [
    cfg.ListOpt(
        "api_servers",
        help="Image service endpoints to use instead of the service catalog, e.g. http://10.0.1.0:9292. "
        "One is chosen at random per request; a retry goes on to the next one. Prefer a load balancer and "
        "the catalog (or endpoint_override) in production.",
    ),
    cfg.IntOpt(
        "num_retries",
        default=3,
        min=0,
        help="How many times a request to the image service is retried when it cannot be reached or "
        "answers 503 (one second apart). 0 means no retries.",
    ),
    cfg.BoolOpt("debug", default=False, help="Log every image service request and response at DEBUG level."),
]

# Glance v2's base image properties (its image schema); everything else is a custom property.
BASE_PROPERTIES = frozenset({
    "id", "name", "status", "visibility", "protected", "os_hidden", "checksum", "os_hash_algo",
    "os_hash_value", "owner", "size", "virtual_size", "container_format", "disk_format", "created_at",
    "updated_at", "tags", "direct_url", "min_ram", "min_disk", "self", "file", "schema", "locations",
    "stores",
})
# Left out of the image dict, as Nova leaves them out (virtual_size is kept: disks are sized from it).
_OMITTED = frozenset({"self", "schema", "protected", "file", "tags", "direct_url", "locations"})


def register_opts(conf: cfg.ConfigOpts) -> None:
    if GROUP in conf and "api_servers" in conf[GROUP]:
        return  # already registered (one client per process, but tests build several)
    register_client_opts(conf, GROUP, GLANCE_OPTS, auth=False, adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES))


def list_opts():
    return [(GROUP, client_opts(GLANCE_OPTS, auth=False, adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES)))]


def image_from_glance(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A Glance v2 image body as the plain dict Nova's checks read.

    Base properties stay at the top level, custom ones go under ``properties``; ``visibility``
    also gives ``is_public``; an image without data has ``size`` 0; min_ram and min_disk are
    integers (0 when absent).
    """
    image: dict[str, Any] = {"properties": {}, "deleted": False, "deleted_at": None, "disk_format": None,
                             "container_format": None, "name": None, "checksum": None}
    for name, value in raw.items():
        if name in _OMITTED:
            continue
        if name == "visibility":
            image["visibility"] = value
            image["is_public"] = value == "public"
        elif name in BASE_PROPERTIES:
            image[name] = value
        else:
            image["properties"][name] = value
    image["size"] = int(image.get("size") or 0)
    image["min_ram"] = int(image.get("min_ram") or 0)
    image["min_disk"] = int(image.get("min_disk") or 0)
    return image


def auth_for(context, environ: Mapping[str, Any] | None) -> ks_plugin.BaseAuthPlugin | None:
    """The caller's credentials as a keystoneauth plugin (None: no token at all, e.g. noauth2 without one)."""
    return caller_auth(context, environ)


class GlanceClient:
    """Reads images from Glance v2 for one OpenKeel process (thread-safe; one session, pooled)."""

    retry_delay = 1.0  # seconds between attempts, as Nova waits

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        register_opts(conf)
        self._keystone = ConfSession(conf, GROUP)
        self.session = self._keystone.session

    # -- endpoints -------------------------------------------------------------------------------
    def _servers(self, auth) -> Iterator[str]:
        servers = list(self.conf.glance.api_servers or [])
        if servers:
            random.shuffle(servers)
            return itertools.cycle(servers)
        adapter = self._adapter(auth, None)
        try:
            endpoint = adapter.get_endpoint()
        except ks_exc.CatalogException as exc:
            endpoint, missing = None, str(exc)
        except ks_exc.ClientException as exc:
            raise errors.ImageServiceUnavailable(str(self.conf.glance.endpoint_override), str(exc)) from None
        else:
            missing = "no endpoint"
        if not endpoint:
            raise errors.ImageServiceUnavailable(
                "None", f"{missing} (image service of the token's catalog, interfaces "
                f"{', '.join(self.conf.glance.valid_interfaces)}): set [glance] api_servers or endpoint_override, "
                "or register an 'image' service in the catalog")
        return itertools.cycle([re.sub(r"/v\d+(\.\d+)?/?$", "/", endpoint)])

    def _adapter(self, auth, endpoint: str | None):
        return self._keystone.adapter(auth, endpoint_override=endpoint)

    def endpoint(self, context, environ=None) -> str:
        """The image service's root URL for this caller (no trailing slash)."""
        return next(self._servers(auth_for(context, environ))).rstrip("/")

    def download_url(self, context, image_id: str, environ=None) -> str:
        """Where an importer fetches the image's bytes: ``{endpoint}/v2/images/{id}/file``."""
        return f"{self.endpoint(context, environ)}/v2/images/{image_id}/file"

    # -- calls -------------------------------------------------------------------------------------
    def link_base(self, context, environ=None) -> str:
        """The image service's URL as Nova writes it into the proxy's "alternate" links: an
        ``api_servers`` entry as configured, or the catalog's endpoint without its version."""
        return next(self._servers(auth_for(context, environ)))

    def _get(self, context, path: str, environ=None):
        return self._call(context, "get", path, environ)

    def _call(self, context, method: str, path: str, environ=None, **kwargs):
        """One request, retried as Nova's Glance client retries any call it could not deliver."""
        auth = auth_for(context, environ)
        servers = self._servers(auth)
        attempts = 1 + self.conf.glance.num_retries
        for attempt in range(1, attempts + 1):
            server = next(servers)
            adapter = self._adapter(auth, server)
            try:
                extra = {"logger": LOG} if self.conf.glance.debug else {}
                headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
                resp = adapter.request(path, method.upper(), authenticated=auth is not None, headers=headers,
                                       **extra, **kwargs)
            except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.RetriableConnectionFailure,
                    ks_exc.UnknownConnectionError, ks_exc.SSLError) as exc:
                reason = str(exc)
            else:
                if resp.status_code != 503:
                    return resp
                reason = f"HTTP 503 Service Unavailable: {resp.text[:200]}"
            LOG.error("Error contacting glance server '%s' for '%s', %s.", server, method,
                      "retrying" if attempt < attempts else "done trying")
            if attempt == attempts:
                raise errors.ImageServiceUnavailable(server, reason)
            time.sleep(self.retry_delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def show(self, context, image_id: str, environ=None) -> dict[str, Any]:
        """The image as a plain dict (see image_from_glance), or an images.errors error."""
        resp = self._get(context, f"/v2/images/{image_id}", environ)
        if resp.status_code in (401, 403):
            raise errors.ImageNotAuthorized(image_id)
        if resp.status_code == 404:
            raise errors.ImageNotFound(image_id)
        if resp.status_code == 400:
            raise errors.ImageBadRequest(image_id, f"HTTP 400 Bad Request: {resp.text}")
        if not resp.ok:
            raise errors.ImageError(f"Unexpected response from the image service for image {image_id}: "
                                    f"{resp.status_code} {resp.text[:200]}")
        return image_from_glance(resp.json())

    def _image_errors(self, resp, image_id: str) -> None:
        """Nova's translation of an answer about one image (its _translate_image_exception)."""
        if resp.status_code in (401, 403):
            raise errors.ImageNotAuthorized(image_id)
        if resp.status_code == 404:
            raise errors.ImageNotFound(image_id)
        if resp.status_code == 400:
            raise errors.ImageBadRequest(image_id, client_error_text(resp))
        if not resp.ok:
            raise errors.ImageError(f"Unexpected response from the image service for image {image_id}: "
                                    f"{resp.status_code} {resp.text[:200]}")

    def list_images(self, context, filters: Mapping[str, str], *, limit: int | None = None,
                    page_size: int | None = None, marker: str | None = None,
                    environ=None) -> list[dict[str, Any]]:
        """Images matching ``filters`` (Glance v2 names), ``limit`` at most, after ``marker``: pages of
        ``page_size`` (200 by default) followed by their ``next`` links, as Nova's Glance client reads them.
        A refusal is ImageListRefused with Glance's words."""
        page_size = page_size or DEFAULT_PAGE_SIZE
        query = {**filters, "limit": str(min(page_size, limit) if limit else page_size)}
        if marker is not None:
            query["marker"] = marker
        path: str | None = "/v2/images?" + urllib.parse.urlencode(query)
        images: list[dict[str, Any]] = []
        while path:
            resp = self._get(context, path, environ)
            if not resp.ok:
                raise errors.ImageListRefused(resp.status_code, client_error_text(resp))
            body = resp.json()
            for raw in body.get("images", []):
                images.append(image_from_glance(raw))
                if limit and len(images) >= limit:
                    return images
            path = body.get("next")
        return images

    def delete(self, context, image_id: str, environ=None) -> None:
        resp = self._call(context, "delete", f"/v2/images/{image_id}", environ)
        if resp.status_code == 409:
            raise errors.ImageDeleteConflict(client_error_text(resp))
        self._image_errors(resp, image_id)

    def create(self, context, body: Mapping[str, Any], environ=None) -> dict[str, Any]:
        """A new image record (status ``queued``, no data) with these Glance v2 fields, as Nova's
        image API creates a snapshot's image; custom properties are strings or None (Nova's _convert_to_v2)."""
        sent: dict[str, Any] = {}
        for name, value in body.items():
            if name in ("kernel_id", "ramdisk_id") and value is not None and str(value).strip().lower() in ("none", ""):
                continue
            if name in BASE_PROPERTIES or value is None or isinstance(value, str):
                sent[name] = int(value) if name in ("min_ram", "min_disk") else value
            else:
                sent[name] = str(value)
        resp = self._call(context, "post", "/v2/images", environ, json=sent)
        if resp.status_code in (401, 403):
            raise errors.ImageNotAuthorized("")
        if resp.status_code == 400:
            raise errors.ImageBadRequest("", client_error_text(resp))
        if not resp.ok:
            raise errors.ImageError(f"Unexpected response from the image service: {resp.status_code} "
                                    f"{resp.text[:200]}")
        return image_from_glance(resp.json())

    def add_member(self, context, image_id: str, member: str, environ=None) -> None:
        """Give project ``member`` access to a shared image, as Nova does for the server's project when
        someone of another project snapshots it."""
        resp = self._call(context, "post", f"/v2/images/{image_id}/members", environ, json={"member": member})
        self._image_errors(resp, image_id)

    def update_base(self, context, image_id: str, fields: Mapping[str, Any], environ=None) -> None:
        """Set base properties (``disk_format``, ``container_format``, ...) by JSON-patch (add replaces)."""
        patch = [{"op": "add", "path": f"/{name}", "value": value} for name, value in fields.items()]
        resp = self._call(context, "patch", f"/v2/images/{image_id}", environ, json=patch,
                          headers={"Content-Type": "application/openstack-images-v2.1-json-patch"})
        self._image_errors(resp, image_id)

    def upload(self, context, image_id: str, data: Iterable[bytes], environ=None) -> None:
        """Stream the image's data (``PUT /v2/images/{id}/file``): Glance shows it ``saving``, then ``active``.
        Not retried (the data cannot be sent twice); a broken connection is ImageServiceUnavailable."""
        auth = auth_for(context, environ)
        server = next(self._servers(auth))
        try:
            resp = self._adapter(auth, server).request(
                f"/v2/images/{image_id}/file", "PUT", authenticated=auth is not None, data=data,
                headers={"Content-Type": "application/octet-stream"})
        except ks_exc.ClientException as exc:
            raise errors.ImageServiceUnavailable(server, str(exc)) from None
        if resp.status_code == 503:
            raise errors.ImageServiceUnavailable(server, f"HTTP 503 Service Unavailable: {resp.text[:200]}")
        self._image_errors(resp, image_id)

    def update_properties(self, context, image_id: str, properties: Mapping[str, str | None],
                          environ=None) -> dict[str, Any]:
        """Give the image exactly these custom properties (what Nova's proxy does with purge_props): one
        JSON-patch of the properties added, changed and removed, as Nova's Glance client sends it."""
        current = self.show(context, image_id, environ)["properties"]
        wanted = {}
        for name, value in properties.items():
            if name in ("kernel_id", "ramdisk_id") and value is not None and str(value).strip().lower() in (
                    "none", ""):
                if name in current:  # Nova neither sends it nor removes it
                    wanted[name] = current[name]
                continue
            wanted[name] = value if value is None or isinstance(value, str) else str(value)
        properties = wanted
        patch = [{"op": "remove", "path": f"/{name}"} for name in current if name not in properties]
        for name, value in properties.items():
            if name not in current:
                patch.append({"op": "add", "path": f"/{name}", "value": value})
            elif current[name] != value:
                patch.append({"op": "replace", "path": f"/{name}", "value": value})
        resp = self._call(context, "patch", f"/v2/images/{image_id}", environ, json=patch,
                          headers={"Content-Type": "application/openstack-images-v2.1-json-patch"})
        self._image_errors(resp, image_id)
        return self.show(context, image_id, environ)


DEFAULT_PAGE_SIZE = 200  # python-glanceclient's


def client_error_text(resp) -> str:
    """What python-glanceclient's exception says of an error answer ("HTTP <details>"), which Nova's
    messages quote: the JSON body's messages, or an HTML page's lines without tags, joined."""
    content_type = resp.headers.get("Content-Type", "")
    text = resp.text
    if text and "json" in content_type:
        try:
            messages = [obj.get("message") for obj in resp.json().values() if isinstance(obj, dict)]
        except ValueError:
            messages = []
        details = "\n".join(m for m in messages if m is not None)
    elif text and "html" in content_type:
        lines = [re.sub(r"<.+?>", "", line.strip()) for line in text.splitlines()]
        details = ": ".join(dict.fromkeys(line for line in lines if line))
    elif text:
        details = text.replace("\n\n", "\n")
    else:
        details = ""
    return f"HTTP {details or 'HTTPException'}"
