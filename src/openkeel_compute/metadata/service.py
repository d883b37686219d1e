"""The metadata service's WSGI application: Nova 34.0.0's metadata API (nova/api/metadata/handler.py).

Stateless, as the compute API is: each request names its server, and the documents are read from the
database (kept ``[api] metadata_cache_expiration`` seconds per server). With ``[neutron]`` (Neutron is the
network service) the EC2 ``security-groups`` are read from Neutron with them, as Nova's InstanceMetadata
reads them (``port_groups``); without it the service reads the database only. How the caller is
identified, as Nova's:

- ``[neutron] service_metadata_proxy = true`` (Neutron's metadata proxy in front): the request must carry
  ``X-Instance-ID``, ``X-Instance-ID-Signature`` (HMAC-SHA256 of the id with ``[neutron]
  metadata_proxy_shared_secret``, hex) and ``X-Tenant-ID``: a header missing is 400 with Nova's words, a
  wrong signature 403 "Invalid proxy request signature.", a server of another project 404;
- otherwise by the caller's address: the server whose fixed IP it is (the peer's address, or the first of
  ``X-Forwarded-For`` with ``[api] use_forwarded_for``); none: 404.

``/`` lists the EC2 versions without identifying anyone. Paths the server's metadata does not have are 404.
``openstack/<version>/password``: GET answers the password the guest posted, POST stores one (409 when one
is set, 400 over 255 × 4 bytes), as Nova's. Errors are webob's pages, as Nova's; a server's documents that
cannot be read are 500 "An unknown error has occurred. Please try your request again." as Nova's, except
when Neutron is unreachable or failing: 503 with the same words (Nova's 500 there is its catch-all, but the
guest's request is fine and can be retried).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import webob
import webob.dec
import webob.exc
from sqlalchemy import Engine

from openkeel_compute.compute import networks
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.metadata import records
from openkeel_compute.metadata.documents import (
    PASSWORD,
    VERSIONS,
    Documents,
    NotFound,
    Record,
    Site,
    ec2_print,
)
from openkeel_compute.network import errors as net_errors

LOG = logging.getLogger(__name__)
UNKNOWN = "An unknown error has occurred. Please try your request again."
MAX_PASSWORD = networks.PASSWORD_CHUNKS * networks.PASSWORD_CHUNK_LENGTH


class Cache:
    """Values kept ``ttl`` seconds (0: none kept), as Nova's metadata cache."""

    def __init__(self, ttl: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._values: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            found = self._values.get(key)
            if found is None or found[0] <= self.clock():
                self._values.pop(key, None)
                return None
            return found[1]

    def set(self, key: str, value: Any) -> None:
        if self.ttl > 0:
            with self._lock:
                self._values[key] = (self.clock() + self.ttl, value)

    def drop(self, key: str) -> None:
        with self._lock:
            self._values.pop(key, None)


class PortGroups:
    """The names of a server's security groups as Nova's metadata API reads them when Neutron is the network
    service (InstanceMetadata's ``get_instance_security_groups``): the groups of the server's ports, asked
    with the ``[neutron]`` credential (the guest's request carries no token: Nova uses an admin context, so
    its Neutron client loads ``[neutron]``'s auth plugin). Port after port in Neutron's order, a group on
    two ports twice, one without a name by its id, none for a server without ports (network/port_groups.py,
    the same reading as server bodies')."""

    def __init__(self, conf: Any) -> None:
        from openkeel_compute.network.client import NeutronClient

        self.client = NeutronClient(conf)

    def __call__(self, uuid: str) -> tuple[str, ...]:
        from openkeel_compute.network import port_groups

        found = port_groups.by_server(self.client.admin(), [uuid])
        return tuple(port_groups.names(found.get(uuid, [])))


class MetadataApp:
    def __init__(self, engine: Engine, *, proxy: bool = False, shared_secret: str = "",
                 use_forwarded_for: bool = False, cache_expiration: int = 15, site: Site | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 security_groups: Callable[[str], tuple[str, ...]] | None = None) -> None:
        """``security_groups``: a server's group names from the network service (``PortGroups`` with
        ``[neutron]``); None: the names kept with the server at boot."""
        self.engine, self.proxy, self.secret = engine, proxy, shared_secret
        self.use_forwarded_for, self.site = use_forwarded_for, site or Site()
        self.security_groups = security_groups
        self.cache = Cache(cache_expiration, clock)
        if proxy and not shared_secret:
            LOG.warning("metadata_proxy_shared_secret is not configured, the metadata information returned by "
                        "the proxy cannot be trusted")

    @classmethod
    def from_conf(cls, conf: Any, engine: Engine) -> MetadataApp:
        from openkeel_compute.conf import neutron as neutron_conf

        if any(name.startswith("OS_NEUTRON__") for name in os.environ):
            # [neutron] given by the environment only (deploy/: the Secret's shared secret)
            neutron_conf.register_neutron_opts(conf)
        # without [neutron] nothing of it is registered (keystoneauth stays unloaded): Nova's defaults
        with_neutron = neutron_conf.configured(conf)
        proxy, secret = False, ""
        if neutron_conf.GROUP in conf and "service_metadata_proxy" in conf[neutron_conf.GROUP]:
            proxy, secret = conf.neutron.service_metadata_proxy, conf.neutron.metadata_proxy_shared_secret
        static: dict[str, Any] = {}
        if conf.api.vendordata_jsonfile_path:
            with open(conf.api.vendordata_jsonfile_path, encoding="utf-8") as f:
                static = json.load(f)
        site = Site(dhcp_domain=conf.api.dhcp_domain or "", vendordata_providers=tuple(conf.api.vendordata_providers),
                    static_vendor_data=static)
        return cls(engine, proxy=proxy, shared_secret=secret, use_forwarded_for=conf.api.use_forwarded_for,
                   cache_expiration=conf.api.metadata_cache_expiration, site=site,
                   security_groups=PortGroups(conf) if with_neutron else None)

    # -- who asks -------------------------------------------------------------------------------------

    def _record(self, uuid: str) -> Record | None:
        key = f"metadata-{uuid}"
        found: Record | None = self.cache.get(key)
        if found is not None:
            return found
        with reader(self.engine) as conn:
            record = records.by_uuid(conn, uuid)
        if record is not None and self.security_groups is not None:
            # as Nova's InstanceMetadata: read once the server is found, outside the database's transaction,
            # and kept with the documents (a change in Neutron shows once they expire); a failure keeps nothing
            record = dataclasses.replace(record, security_groups=self.security_groups(record.uuid))
        if record is not None:
            self.cache.set(key, record)
        return record

    def _by_address(self, address: str | None) -> Record | None:
        key = f"metadata-address-{address}"
        uuid = self.cache.get(key)
        if uuid is None:
            with reader(self.engine) as conn:
                uuid = records.uuid_by_address(conn, address or "")
            if uuid is None:
                LOG.error("Failed to get metadata for IP %s: no metadata", address)
                return None
            self.cache.set(key, uuid)
        return self._record(uuid)

    def _by_instance_id(self, req: webob.Request) -> Record | None:
        headers = req.headers
        # (a WSGI environ holds one value per header: Nova's "Multiple X-Instance-ID headers" cannot happen)
        instance_id, tenant_id = headers.get("X-Instance-ID"), headers.get("X-Tenant-ID")
        signature = headers.get("X-Instance-ID-Signature")
        message = None
        if instance_id is None:
            message = "X-Instance-ID header is missing from request."
        elif signature is None:
            message = "X-Instance-ID-Signature header is missing from request."
        elif tenant_id is None:
            message = "X-Tenant-ID header is missing from request."
        if message or instance_id is None or tenant_id is None:
            raise webob.exc.HTTPBadRequest(explanation=message)
        expected = hmac.new(self.secret.encode(), instance_id.encode(), hashlib.sha256).hexdigest()
        if not signature or not hmac.compare_digest(expected, signature):
            LOG.warning("X-Instance-ID-Signature: %s does not match the expected signature for id: %s. Request "
                        "From: %s", signature, instance_id, headers.get("X-Forwarded-For"))
            raise webob.exc.HTTPForbidden(explanation="Invalid proxy request signature.")
        record = self._record(instance_id)
        if record is not None and record.project_id != tenant_id:
            LOG.warning("Tenant_id %s does not match tenant_id of instance %s.", tenant_id, instance_id)
            return None
        return record

    def _address(self, req: webob.Request) -> str | None:
        if self.use_forwarded_for and req.headers.get("X-Forwarded-For"):
            return str(req.headers["X-Forwarded-For"]).split(",")[0].strip()
        return req.remote_addr

    # -- the answer -----------------------------------------------------------------------------------

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> webob.Response:
        if req.path_info in ("", "/") or req.path_info.strip("/") == "":
            return webob.Response(body=ec2_print([*VERSIONS, "latest"]), content_type="text/plain",
                                  charset="UTF-8")
        try:
            record = self._by_instance_id(req) if self.proxy else self._by_address(self._address(req))
        except webob.exc.HTTPException:
            raise
        except net_errors.Unauthorized:
            # [neutron]'s credential refused: the operator's to fix (Nova's
            # NeutronAdminCredentialConfigurationInvalid, its 500)
            LOG.exception("Failed to get metadata: Neutron refused the [neutron] credential")
            raise webob.exc.HTTPInternalServerError(explanation=UNKNOWN) from None
        except net_errors.NetworkError as exc:
            # Nova answers its catch-all 500; the network service failing is a 503 (nothing is wrong with the
            # guest's request, which it can retry), with Nova's words: what Neutron did is for the log only
            LOG.warning("Failed to get metadata: the security groups could not be read from Neutron: %s",
                        exc.message)
            raise webob.exc.HTTPServiceUnavailable(explanation=UNKNOWN) from None
        except Exception:
            LOG.exception("Failed to get metadata")
            raise webob.exc.HTTPInternalServerError(explanation=UNKNOWN) from None
        if record is None:
            raise webob.exc.HTTPNotFound()
        documents = Documents(record, self.site, address=self._address(req))
        try:
            data, content_type = documents.lookup(req.path_info)
        except NotFound:
            raise webob.exc.HTTPNotFound() from None
        if data is PASSWORD:
            return self._password(req, record)
        return webob.Response(body=ec2_print(data), content_type=content_type, charset="UTF-8")

    def _password(self, req: webob.Request, record: Record) -> webob.Response:
        if req.method == "GET":
            return webob.Response(body=record.password.encode(), content_type="text/plain", charset="UTF-8")
        if req.method != "POST":
            raise webob.exc.HTTPBadRequest(explanation="GET and POST only are supported.")
        if record.password:
            raise webob.exc.HTTPConflict()
        body = req.body
        if (req.content_length or 0) > MAX_PASSWORD or len(body) > MAX_PASSWORD:
            raise webob.exc.HTTPBadRequest(explanation="Request is too large.")
        with transaction(self.engine) as conn:
            if networks.password_of(conn, record.uuid):
                raise webob.exc.HTTPConflict()
            networks.set_password(conn, record.uuid, body.decode("utf-8", "replace"))
        self.cache.drop(f"metadata-{record.uuid}")
        return webob.Response(status=200, body=b"", content_type="text/html", charset="UTF-8")
