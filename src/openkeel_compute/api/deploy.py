"""The whole WSGI pipeline, assembled in one place.

Read from the outside in (the order a request meets them):

  healthcheck        /healthcheck answers here, before anything else (oslo.middleware's app,
                     with the database backend of api/health.py: 503 when it does not answer)
  request id         x-openstack-request-id and x-compute-request-id on every answer
  proxy headers      X-Forwarded-* (only with [oslo_middleware] enable_proxy_headers_parsing)
  access log         one line per request, with its request id, status and time
  noauth2 identity   with noauth2 only: /identity answers the project look-ups of the openstack
                     CLI (api/noauth_identity.py)
  url map            runs of slashes count as one; /, /v2.1, /v2 version documents (no auth, any
                     method, HEAD without the body); /v2.1/… and /v2/… to the API, where
                     /{project_id}/ and /versions/{id} are the version document again;
                     anything else: Nova's 300 "multiple choices"
  then, for the API only:
  sizelimit          413 before authentication is looked at (Nova's order); oslo.middleware's
                     limiter, skipped by GET and DELETE requests that carry no body at all
  auth               keystonemiddleware auth_token, or noauth2 (development)
  context            401 for anonymous requests, else the request context
  the router         Falcon: routes, microversions, faults, handlers (api/router.py)
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import falcon
import webob.exc
from oslo_config import cfg
from oslo_middleware import healthcheck, request_id, sizelimit
from oslo_middleware.http_proxy_to_wsgi import HTTPProxyToWSGI

from openkeel_compute import logsafe, policies
from openkeel_compute.api import auth, faults, links, router, versions
from openkeel_compute.api.common import Services
from openkeel_compute.db import api as db_api

LOG = logging.getLogger(__name__)
ACCESS_LOG = logging.getLogger("openkeel_compute.api.access")

_GLOBAL_ID = re.compile(request_id.ID_FORMAT)

# Nova routes /v2.1/{project_id}/… only for ids made of these characters.
_PROJECT_ID_SEGMENT = re.compile(r"^[0-9a-f\-]+$")
_SLASHES = re.compile("//+")


class ComputeRequestId:
    """oslo.middleware's request-id contract in plain WSGI, also answered as x-compute-request-id.

    Same environ keys (``openstack.request_id``, ``openstack.global_request_id`` from a valid
    inbound X-OpenStack-Request-ID) and same headers as ``oslo_middleware.RequestId`` with Nova's
    compat header, without building webob Request/Response objects on every call.
    """

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        inbound = environ.get("HTTP_X_OPENSTACK_REQUEST_ID", "")
        if inbound and _GLOBAL_ID.match(inbound):
            environ[request_id.GLOBAL_REQ_ID] = inbound
        req_id = "req-" + str(uuid.uuid4())
        environ[request_id.ENV_REQUEST_ID] = req_id

        def _start_response(status, headers, exc_info=None):
            names = {name.lower() for name, _ in headers}
            for header in ("x-openstack-request-id", "x-compute-request-id"):
                if header not in names:
                    headers.append((header, req_id))
            return start_response(status, headers, exc_info)

        return self.app(environ, _start_response)


class AccessLog:
    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        started = time.monotonic()
        seen: dict = {}

        def _start_response(status, headers, exc_info=None):
            seen["status"] = status.split(" ", 1)[0]
            for name, value in headers:
                if name.lower() == "openstack-api-version":
                    seen["version"] = value
            return start_response(status, headers, exc_info)

        try:
            return self.app(environ, _start_response)
        finally:
            if ACCESS_LOG.isEnabledFor(logging.INFO):
                qs = environ.get("QUERY_STRING")
                ACCESS_LOG.info(
                    '[%s] %s "%s %s%s" status: %s microversion: %s time: %.4f',
                    environ.get("openstack.request_id", "-"),
                    environ.get("REMOTE_ADDR", "-"),
                    environ.get("REQUEST_METHOD"),
                    environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""),
                    "?" + qs if qs else "",
                    seen.get("status", "-"),
                    seen.get("version", "-"),
                    time.monotonic() - started,
                )


class URLMap:
    """Nova's url map: version documents, the two API prefixes, and 300 for everything else."""

    def __init__(self, api_app, versions_app, conf, services):
        self.api = api_app
        self.versions_app = versions_app
        self.link_prefix = conf.api.compute_link_prefix
        self.services = services

    @staticmethod
    def _prefix(environ) -> str:
        scheme = environ.get("wsgi.url_scheme", "http")
        host = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "localhost")
        return f"{scheme}://{host}" + environ.get("SCRIPT_NAME", "")

    def _mount(self, environ, prefix: str, rest: str) -> None:
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
        environ["PATH_INFO"] = rest or "/"
        if prefix == "/v2":
            environ["openkeel.legacy_v2"] = True

    def __call__(self, environ, start_response):
        environ["openkeel.services"] = self.services
        # Runs of slashes count as one, everywhere in the path, before anything is matched
        # (Nova's url map does the same): //v2.1// is /v2.1/.
        path = _SLASHES.sub("/", environ.get("PATH_INFO", "") or "/")
        environ["openkeel.original_path"] = environ.get("SCRIPT_NAME", "") + path
        head = environ.get("REQUEST_METHOD") == "HEAD"
        for prefix in ("/v2.1", "/v2"):
            if path == prefix or path == prefix + "/":
                # The unauthenticated version document answers every method as a GET;
                # HEAD gets the same status and headers without the body.
                self._mount(environ, prefix, "/")
                environ["openkeel.version_document"] = True
                environ["REQUEST_METHOD"] = "GET"
                body = self.versions_app(environ, start_response)
                return _no_body(body) if head else body
            if path.startswith(prefix + "/"):
                self._mount(environ, prefix, path[len(prefix):])
                self._take_project_id(environ)
                return self.api(environ, start_response)
        prefix = links.update_link_prefix(self._prefix(environ), self.link_prefix)
        if path == "/":
            body = versions.versions_document(prefix)
            status = "200 OK"
        else:
            body = versions.choices_document(prefix, path)
            status = "300 Multiple Choices"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [] if head else [body]

    @staticmethod
    def _take_project_id(environ) -> None:
        # /v2.1/{project_id}/<resource>… and /v2.1/{project_id}/ (the version document):
        # remember the id (checked against the token later, as Nova does after parsing the
        # body) and route on the rest. /v2.1/{project_id} without the slash is no route.
        path = environ["PATH_INFO"]
        first, sep, rest = path[1:].partition("/")
        if sep and _PROJECT_ID_SEGMENT.match(first):
            environ["openkeel.url_project_id"] = first
            environ["PATH_INFO"] = "/" + rest


def _no_body(body):
    close = getattr(body, "close", None)
    if close is not None:
        close()
    return []


def _not_found(req: falcon.Request, resp: falcon.Response, ex, params) -> None:
    # Unknown routes and methods: webob's page with no version headers, as Nova's router answers.
    status, headers, body = faults.webob_error(404, req.env)
    resp.status = status
    for name, value in headers:
        if name.lower() == "content-type":
            resp.content_type = value
    resp.data = body


def _unexpected(req: falcon.Request, resp: falcon.Response, ex, params) -> None:
    if isinstance(ex, (falcon.HTTPError, webob.exc.HTTPRequestEntityTooLarge)):
        # The body-size limiter's reader stopped a chunked body: its own 413 page answers.
        raise ex
    LOG.exception("Unexpected exception in API method")
    resp.status = 500
    resp.content_type = faults.ERROR_CONTENT_TYPE
    # an error standing for one of Nova's names the class Nova's answer names
    named = getattr(ex, "nova_exception_class", None)
    resp.data = faults.fault_body(
        500, f"Unexpected API Error. Please contact the administrator\n{f'<class {named!r}>' if named else type(ex)}"
    )


class SplitVary:
    """Nova sends one ``Vary`` line per header name; Falcon folds them into one. Unfold."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        def _start_response(status, headers, exc_info=None):
            fixed = []
            for name, value in headers:
                if name.lower() == "vary" and "," in value:
                    fixed.extend(("Vary", part.strip()) for part in value.split(","))
                else:
                    fixed.append((name, value))
            return start_response(status, fixed, exc_info)

        return self.app(environ, _start_response)


class BodySizeLimit:
    """oslo.middleware's RequestBodySizeLimiter for every request that can carry a body.

    The limiter is a webob ``wsgify`` filter: a webob Request and Response per call, a seventh of
    a flavor show's time. A GET or DELETE with neither Content-Length nor Transfer-Encoding has no
    body (RFC 9112, section 6.3), so the limiter has nothing to check or wrap, and its webob round trip
    changes nothing for those methods (it only rewrites HEAD answers and relative Location
    headers); they go straight to the application. Everything else meets the real limiter.
    """

    _BODYLESS_METHODS = frozenset({"GET", "DELETE"})

    def __init__(self, application, conf):
        self.application = application
        self.limiter = sizelimit.RequestBodySizeLimiter(application, conf)

    def __call__(self, environ, start_response):
        if (environ.get("REQUEST_METHOD") in self._BODYLESS_METHODS and not environ.get("CONTENT_LENGTH")
                and "HTTP_TRANSFER_ENCODING" not in environ):
            return self.application(environ, start_response)
        return self.limiter(environ, start_response)


def build_router(conf) -> falcon.App:
    app = falcon.App(media_type="application/json")
    app.req_options.strip_url_path_trailing_slash = False
    app.req_options.auto_parse_qs_csv = False
    app.resp_options.secure_cookies_by_default = False
    for template, endpoint in router.endpoints():
        app.add_route(template, endpoint)
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPRouteNotFound, _not_found)
    app.add_error_handler(falcon.HTTPMethodNotAllowed, _not_found)
    app.add_error_handler(falcon.HTTPNotFound, _not_found)
    return app


def build_services(conf: cfg.ConfigOpts) -> Services:
    notifier = None
    notifier_class: Any = None
    try:
        from openkeel_compute.notifications import ApiNotifier as notifier_class
    except ImportError:  # pragma: no cover - notifications room not installed
        pass
    engine = db_api.get_engine(conf)
    if notifier_class is not None:
        from openkeel_compute.notifications import server_events

        notifier = notifier_class(conf, host=conf.host, engine=engine)
        # Server notifications leave from the hooks in compute/ (after each commit), not from handlers.
        server_events.install(notifier if notifier.sends_servers else None)
        if not notifier.enabled:
            # Handlers gather payloads only for a notifier: none at all when nothing is sent.
            notifier = None
    verify = None
    if conf.api.auth_strategy == "keystone":
        from openkeel_compute.api.identity import ProjectVerifier

        verify = ProjectVerifier(conf)
    return Services(conf=conf, engine=engine, notifier=notifier, verify_project=verify)


def _health_backends(conf: cfg.ConfigOpts) -> list[str]:
    """[healthcheck] backends, always with the database ping (api/health.py) after them."""
    from openkeel_compute.api import health

    backends = list(conf.healthcheck.backends)
    return backends if health.NAME in backends else [*backends, health.NAME]


def _catalog_image_url(conf) -> str | None:
    """The image service the noauth2 identity answer lists in its catalog: the first [glance] api_servers."""
    from openkeel_compute.images import glance

    glance.register_opts(conf)
    servers = conf.glance.api_servers or []
    return servers[0] if servers else conf.glance.endpoint_override


def _catalog_placement_url(conf) -> str | None:
    """Placement in the noauth2 identity answer's catalog: the embedded one (its token is ``user:project``
    too), which ``[placement]`` reaches with ``auth_type = admin_token``."""
    from openkeel_compute.placement import client

    client.register_opts(conf)
    if conf.placement.auth_type != "admin_token":
        return None
    return conf.placement.endpoint_override


def _catalog_volume_template(conf) -> str | None:
    """Cinder in the noauth2 identity answer's catalog: ``[cinder] endpoint_template`` (a Cinder behind the
    catalog of a real Keystone is not known here)."""
    from openkeel_compute.conf import cinder

    cinder.register_cinder_opts(conf)
    return conf.cinder.endpoint_template or None


def deploy(conf: cfg.ConfigOpts, services: Services | None = None):
    """Build the WSGI application for ``conf``."""
    logsafe.install()  # whoever configured logging: no log line a client can forge
    policies.init(conf)
    services = services or build_services(conf)
    router_app = SplitVary(build_router(conf))

    api: Any = auth.ContextMiddleware(router_app)
    if conf.api.auth_strategy == "noauth2":
        LOG.warning("[api] auth_strategy = noauth2: any 'X-Auth-Token: user:project' is trusted; requests "
                    "from peers that are not loopback addresses are refused. Development only.")
        api = auth.NoAuth2(api)
    else:
        api = auth.keystone_auth_token(api, conf)
    api = BodySizeLimit(api, conf)

    app: Any = URLMap(api, router_app, conf, services)
    if conf.api.auth_strategy == "noauth2":
        from openkeel_compute.api.noauth_identity import NoAuthIdentity

        # /identity: tokens with a catalog, and what the openstack CLI reads before flavor create/set
        # The URLs are read at the first identity request: reading them registers [glance] and
        # [placement], keystoneauth's options, which a worker that serves no such request never imports.
        app = NoAuthIdentity(app, urls=lambda: (_catalog_image_url(conf), _catalog_placement_url(conf),
                                                _catalog_volume_template(conf)))
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        # Off by default; the middleware inspects itself on every call, so it is only mounted when on.
        app = HTTPProxyToWSGI(app, conf)
    if conf.api.auth_strategy == "noauth2":
        app = auth.LoopbackPeersOnly(app)  # outside the proxy headers: the TCP peer, never a header
    app = AccessLog(app)
    app = ComputeRequestId(app)
    conf.set_override("backends", _health_backends(conf), group="healthcheck")
    health = healthcheck.Healthcheck(None, conf)

    def application(environ, start_response):
        if environ.get("PATH_INFO") == "/healthcheck":
            return health(environ, start_response)
        return app(environ, start_response)

    return application
