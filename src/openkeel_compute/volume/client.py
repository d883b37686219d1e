"""A Cinder v3 client over keystoneauth, configured by Nova's ``[cinder]`` options (conf/cinder.py).

Who each call is made as, as Nova's ``cinderclient(context)`` decides:

- ``for_caller(context, environ)``: the caller's own token (keystonemiddleware's plugin in the WSGI
  environ, or the token and X-Service-Catalog headers), wrapped with the ``[service_user]`` token
  (X-Service-Token) when ``[service_user] send_service_user_token`` is true: Cinder then trusts the
  call as coming from a service and skips its check-back to the compute API on attachment deletes.
  A caller without any token (noauth2) is served with the ``[cinder]`` credential.
- ``admin()``: the ``[cinder]`` credential (what Nova uses with an admin context without a token),
  also wrapped with the service token when asked.

Where Cinder is: ``[cinder] endpoint_template`` (``%(project_id)s`` and ``%(user_id)s`` filled in),
else the token's catalog as ``catalog_info`` says (``volumev3::publicURL``) in ``os_region_name``.
A refused connection is retried ``[cinder] http_retries`` times. Unreachable, or a 5xx answer:
CinderUnavailable; 401: Unauthorized; 404: the missing thing's NotFound; 400: InvalidInput with
Cinder's message as cinderclient renders it ("<message> (HTTP 400) (Request-ID: ...)").

Every call names its microversion (``OpenStack-API-Version: volume 3.x``): the attachments API is
3.44 (3.54 for an attach mode, 3.27 is its first form and is not used), a volume is read at 3.48
(``shared_targets`` and ``service_uuid``), as Nova reads them.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from openkeel_compute.conf import cinder as cinder_conf
from openkeel_compute.service_session import caller_auth as _caller_auth
from openkeel_compute.volume import errors

LOG = logging.getLogger(__name__)
GROUP = cinder_conf.GROUP
ATTACHMENTS = "3.44"
REIMAGE = "3.68"
VOLUME_READ = "3.48"
BASE = "3.0"


def cinder_message(resp) -> str:
    """Cinder's error as cinderclient renders it: ``<message> (HTTP <code>) (Request-ID: <id>)``."""
    text = f"{cinder_text(resp)} (HTTP {resp.status_code})"
    request_id = resp.headers.get("x-openstack-request-id") or resp.headers.get("x-compute-request-id")
    return f"{text} (Request-ID: {request_id})" if request_id else text


def cinder_text(resp) -> str:
    """Cinder's own words (a cinderclient exception's ``message``). Cinder's bodies are
    ``{"<kind>": {"message": ..., "code": ...}}`` (badRequest, itemNotFound, overLimit, ...)."""
    message = None
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body:
        inner = next(iter(body.values()))
        if isinstance(inner, dict) and "message" in inner:
            message = str(inner["message"])
        elif "message" in body:
            message = str(body["message"])
    if message is None:
        message = resp.text[:300] or resp.reason or "n/a"
    return message


def translated_attachment(attachment: dict) -> dict:
    """The attachment with ``connection_info`` in the shape the rest of the code reads, as Nova's
    ``_translate_attachment_ref`` builds it: Cinder's 3.44 attachments answer it flat (the driver's data with
    ``driver_volume_type`` beside it), the old style nests the data under ``data``. The attachment's own fields
    stay where they are."""
    info = attachment.get("connection_info")
    if not isinstance(info, dict) or not info or "data" in info:
        return attachment
    data = dict(info)
    data.pop("attachment_id", None)
    old_style = {"driver_volume_type": data.pop("driver_volume_type", None), "data": data}
    for key in ("status", "instance", "attached_at", "detached_at"):
        old_style[key] = attachment.get(key)
    return {**attachment, "connection_info": old_style}


class CinderClient:
    """Cinder for one OpenKeel process (thread-safe: one keystoneauth session, its pool shared)."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        cinder_conf.register_cinder_opts(conf)
        self.session = ks_loading.load_session_from_conf_options(conf, GROUP)
        self._admin_auth: Any = None
        self._service_auth: Any = None
        self._service_loaded = False

    # -- credentials ---------------------------------------------------------------------------
    def _admin_plugin(self):
        if self._admin_auth is None and self.conf.cinder.auth_type:
            self._admin_auth = ks_loading.load_auth_from_conf_options(self.conf, GROUP)
        return self._admin_auth

    def _service_plugin(self):
        if not self._service_loaded:
            from openkeel_compute.conf import service_user

            service_user.register_opts(self.conf)
            group = self.conf[service_user.SERVICE_USER]
            if group.send_service_user_token and group.auth_type:
                self._service_auth = ks_loading.load_auth_from_conf_options(self.conf, service_user.SERVICE_USER)
            self._service_loaded = True
        return self._service_auth

    def _wrapped(self, auth):
        service = self._service_plugin()
        if service is None or auth is None:
            return auth
        from keystoneauth1 import service_token

        return service_token.ServiceTokenAuthWrapper(user_auth=auth, service_auth=service)

    def for_caller(self, context, environ=None) -> Calls:
        auth = _caller_auth(context, environ)
        if auth is None:
            return self.admin()
        ids = {"project_id": getattr(context, "project_id", None), "user_id": getattr(context, "user_id", None)}
        return Calls(self, self._wrapped(auth), admin=False, ids=ids)

    def admin(self) -> Calls:
        return Calls(self, self._wrapped(self._admin_plugin()), admin=True, ids={})


class Calls:
    """The Cinder calls Nova makes, as one identity."""

    def __init__(self, client: CinderClient, auth, admin: bool, ids: dict) -> None:
        self.client = client
        self.auth = auth
        self.admin = admin
        self.ids = ids

    def _endpoint(self) -> dict[str, Any]:
        conf = self.client.conf.cinder
        if conf.endpoint_template:
            values = {"project_id": self.ids.get("project_id") or "", "user_id": self.ids.get("user_id") or "",
                      "tenant": self.ids.get("project_id") or "", "user": self.ids.get("user_id") or ""}
            try:
                return {"endpoint_override": conf.endpoint_template % values}
            except (KeyError, ValueError, TypeError) as exc:
                raise errors.CinderUnavailable(f"[cinder] endpoint_template cannot be filled in: {exc}") from None
        service_type, service_name, interface = conf.catalog_info.split(":", 2)
        filters: dict[str, Any] = {"service_type": service_type, "interface": interface,
                                   "region_name": conf.os_region_name}
        if service_name:
            filters["service_name"] = service_name
        return {"endpoint_filter": filters}

    def request(self, method: str, path: str, *, version: str = BASE, params: dict[str, Any] | None = None,
                body: Any = None, ok: tuple[int, ...] = (200, 202, 204)):
        url = path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        endpoint = self._endpoint()
        if "endpoint_override" in endpoint:
            url = endpoint.pop("endpoint_override").rstrip("/") + url
        kwargs: dict[str, Any] = {"headers": {"Accept": "application/json",
                                              "OpenStack-API-Version": f"volume {version}"},
                                  "auth": self.auth, "raise_exc": False, **endpoint}
        if body is not None:
            kwargs["json"] = body
        if self.client.conf.cinder.debug:
            LOG.debug("Cinder %s %s (volume %s)", method, path, version)
        try:
            resp = self.client.session.request(url, method, connect_retries=self.client.conf.cinder.http_retries,
                                               **kwargs)
        except ks_exc.EndpointNotFound as exc:
            raise errors.CinderUnavailable(f"Cinder has no endpoint in the catalog: {exc}") from None
        except ks_exc.MissingAuthPlugin:
            raise errors.CinderUnavailable("no credential for Cinder: set [cinder] auth_type") from None
        except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.RetriableConnectionFailure,
                ks_exc.UnknownConnectionError, ks_exc.SSLError, ks_exc.DiscoveryFailure) as exc:
            raise errors.CinderUnavailable(str(exc)) from None
        except ks_exc.Unauthorized:
            raise errors.Unauthorized() from None
        except ks_exc.ClientException as exc:
            raise errors.CinderUnavailable(str(exc)) from None
        if resp.status_code in ok:
            return resp.json() if resp.content else None
        message = cinder_message(resp)
        if self.client.conf.cinder.debug:
            LOG.debug("Cinder answered %s to %s %s: %s", resp.status_code, method, path, message)
        if resp.status_code == 401:
            LOG.warning("Cinder refused the %s credential: %s", "[cinder]" if self.admin else "caller's", message)
            raise errors.Unauthorized()
        if resp.status_code >= 500:
            raise errors.CinderUnavailable(f"Cinder answered {resp.status_code} to {method} {path}: {message}")
        if resp.status_code == 400:
            raise errors.InvalidInput(message)
        if resp.status_code == 403:
            raise errors.Forbidden(message)
        if resp.status_code == 413:
            raise errors.OverQuota(cinder_text(resp))
        raise errors.CinderError(message, resp.status_code, cinder_text(resp))

    def _one(self, method: str, path: str, missing, *, version: str = BASE, **kwargs):
        """``request``, with Cinder's 404 as ``missing``."""
        try:
            return self.request(method, path, version=version, **kwargs)
        except errors.CinderError as exc:
            if exc.status == 404:
                raise missing from None
            raise

    # -- volumes -------------------------------------------------------------------------------
    def get_volume(self, volume_id: str) -> dict:
        """The volume (at 3.48, as Nova reads it); VolumeNotFound when Cinder does not show it."""
        quoted = urllib.parse.quote(volume_id, safe="")
        return self._one("GET", f"/volumes/{quoted}", errors.VolumeNotFound(volume_id), version=VOLUME_READ)["volume"]

    def create_volume(self, size: int, name: str | None, *, description: str | None = "",
                      snapshot_id: str | None = None, image_id: str | None = None, volume_type: str | None = None,
                      availability_zone: str | None = None, metadata: dict | None = None) -> dict:
        """A new volume (Cinder answers at once, ``creating``). Cinder's 404 (a volume type or snapshot
        it does not know) is NotFound with Cinder's words, its 413 OverQuota, as Nova's create."""
        volume: dict[str, Any] = {"size": size, "name": name, "description": description}
        for key, value in (("snapshot_id", snapshot_id), ("imageRef", image_id), ("volume_type", volume_type),
                           ("availability_zone", availability_zone), ("metadata", metadata)):
            if value:
                volume[key] = value
        try:
            return self.request("POST", "/volumes", body={"volume": volume})["volume"]
        except errors.CinderError as exc:
            if exc.status == 404:
                raise errors.NotFound(exc.cinder_text) from None
            raise

    def list_volumes(self) -> list[dict]:
        """Every volume the caller sees (``/volumes/detail``, Cinder's pages followed as cinderclient does)."""
        return self._all("/volumes/detail", "volumes")

    def list_snapshots(self) -> list[dict]:
        return self._all("/snapshots/detail", "snapshots")

    def _all(self, path: str, key: str) -> list[dict]:
        found: list[dict] = []
        params: dict[str, Any] | None = None
        while True:
            page = self.request("GET", path, params=params)
            items = page.get(key) or []
            found.extend(items)
            following = [link for link in page.get(f"{key}_links") or [] if link.get("rel") == "next"]
            if not following or not items:
                return found
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(following[0]["href"]).query)
            params = {name: values[-1] for name, values in query.items()}

    def delete_volume(self, volume_id: str) -> None:
        try:
            self.request("DELETE", f"/volumes/{urllib.parse.quote(volume_id, safe='')}")
        except errors.CinderError as exc:
            if exc.status == 404:
                raise errors.VolumeNotFound(volume_id) from None
            raise

    def get_snapshot(self, snapshot_id: str) -> dict:
        quoted = urllib.parse.quote(snapshot_id, safe="")
        return self._one("GET", f"/snapshots/{quoted}", errors.SnapshotNotFound(snapshot_id))["snapshot"]

    def create_snapshot(self, volume_id: str, force: bool, name: str | None, description: str | None) -> dict:
        """A snapshot of the volume; VolumeNotFound when Cinder does not show it (as Nova's)."""
        body = {"snapshot": {"volume_id": volume_id, "force": force, "name": name, "description": description}}
        try:
            return self.request("POST", "/snapshots", body=body)["snapshot"]
        except errors.CinderError as exc:
            if exc.status == 404:
                raise errors.VolumeNotFound(volume_id) from None
            raise
        except errors.OverQuota:
            raise errors.OverQuota("Quota exceeded for resources: snapshots") from None

    def absolute_limits(self) -> dict:
        """Cinder's absolute limits of the caller's project (``maxTotalSnapshots``, ``totalSnapshotsUsed``...)."""
        return (self.request("GET", "/limits") or {}).get("limits", {}).get("absolute", {})

    def delete_snapshot(self, snapshot_id: str) -> None:
        quoted = urllib.parse.quote(snapshot_id, safe="")
        self._one("DELETE", f"/snapshots/{quoted}", errors.SnapshotNotFound(snapshot_id))

    def volume_types(self) -> list[dict]:
        return self.request("GET", "/types")["volume_types"]

    def _volume_action(self, volume_id: str, action: dict) -> None:
        quoted = urllib.parse.quote(volume_id, safe="")
        self._one("POST", f"/volumes/{quoted}/action", errors.VolumeNotFound(volume_id), body=action)

    def begin_detaching(self, volume_id: str) -> None:
        """The volume ``detaching`` (Cinder refuses one not ``in-use``: InvalidInput with its words)."""
        self._volume_action(volume_id, {"os-begin_detaching": {}})

    def roll_detaching(self, volume_id: str) -> None:
        """A detach that did not happen: the volume back to ``in-use``."""
        self._volume_action(volume_id, {"os-roll_detaching": {}})

    def reimage(self, volume_id: str, image_id: str, reimage_reserved: bool = True) -> None:
        """Cinder writes ``image_id`` into the volume (``os-reimage``, 3.68; ``reimage_reserved``: the
        volume may be ``reserved``, as the root volume of a rebuild is). Cinder answers 202 at once and
        tells Nova with a ``volume-reimaged`` event when it is done."""
        quoted = urllib.parse.quote(volume_id, safe="")
        self._one("POST", f"/volumes/{quoted}/action", errors.VolumeNotFound(volume_id), version=REIMAGE,
                  body={"os-reimage": {"image_id": image_id, "reimage_reserved": reimage_reserved}})

    # -- attachments (3.44) --------------------------------------------------------------------
    def attachment_create(self, volume_id: str, instance_uuid: str, connector: dict | None = None,
                          mountpoint: str | None = None) -> dict:
        """A new attachment: reserved without a connector, attaching with one (and then
        ``connection_info``). VolumeNotFound when the volume is gone; InvalidInput with Cinder's
        words when it cannot be attached (not available, ...)."""
        attachment: dict[str, Any] = {"volume_uuid": volume_id, "instance_uuid": instance_uuid}
        if connector is not None:
            attachment["connector"] = dict(connector, **({"mountpoint": mountpoint} if mountpoint else {}))
        try:
            return translated_attachment(self.request("POST", "/attachments", version=ATTACHMENTS,
                                                      body={"attachment": attachment})["attachment"])
        except errors.CinderError as exc:
            if exc.status == 404:
                raise errors.VolumeNotFound(volume_id) from None
            raise

    def attachment_get(self, attachment_id: str) -> dict:
        quoted = urllib.parse.quote(attachment_id, safe="")
        return translated_attachment(self._one("GET", f"/attachments/{quoted}", errors.AttachmentNotFound(attachment_id),
                                               version=ATTACHMENTS)["attachment"])

    def attachment_update(self, attachment_id: str, connector: dict, mountpoint: str | None = None) -> dict:
        """The connector given (the node): Cinder exports the volume and answers ``connection_info``."""
        quoted = urllib.parse.quote(attachment_id, safe="")
        body = {"attachment": {"connector": dict(connector, **({"mountpoint": mountpoint} if mountpoint else {}))}}
        return translated_attachment(self._one("PUT", f"/attachments/{quoted}", errors.AttachmentNotFound(attachment_id),
                                               version=ATTACHMENTS, body=body)["attachment"])

    def attachment_complete(self, attachment_id: str) -> None:
        """The volume is in use (``os-complete``)."""
        quoted = urllib.parse.quote(attachment_id, safe="")
        self._one("POST", f"/attachments/{quoted}/action", errors.AttachmentNotFound(attachment_id),
                  version=ATTACHMENTS, body={"os-complete": None})

    def attachment_delete(self, attachment_id: str) -> None:
        """The attachment gone; one already gone is not an error (as Nova treats a 404)."""
        try:
            self.request("DELETE", f"/attachments/{urllib.parse.quote(attachment_id, safe='')}",
                         version=ATTACHMENTS)
        except errors.CinderError as exc:
            if exc.status != 404:
                raise
            LOG.info("Cinder attachment %s was already gone", attachment_id)
