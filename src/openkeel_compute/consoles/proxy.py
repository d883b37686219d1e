"""The console proxy's HTTP and websocket server, on websockify (the library Nova's proxies are built on).

A plain GET serves noVNC's files (the page of [vnc] novncproxy_base_url). A websocket (noVNC's, or a serial
console client's on [serial_console] base_url) is checked as nova-novncproxy checks it, in Nova's order:
the token (``?token=``, or noVNC's ``token`` cookie) must name a console authorisation that has not expired
and whose server exists; an ``Origin`` header must name this host (or one of [console] allowed_origins);
the server must still be on the node the token was given for. A refused websocket is closed as Nova's proxy
closes it: the connection dropped without a websocket close frame (websockify's answer to the handler's
exception), Nova's message ("The token '***' is invalid or has expired", "Origin header does not match this
host.", ...) in the proxy's log only.
Then the proxy opens KubeVirt's ``vnc`` (noVNC tokens) or ``console`` (serial tokens) subresource of the
server's VMI with the controller's credentials and relays the bytes both ways until either side closes.
"""

from __future__ import annotations

import contextlib
import http.cookies
import logging
import os
import socket
import threading
from http.server import HTTPServer
from socketserver import ThreadingMixIn
from typing import Any
from urllib import parse

import sqlalchemy as sa
import websocket
from websockify.websockifyserver import WebSockifyRequestHandler

from openkeel_compute.compute import remote_consoles
from openkeel_compute.consoles.upstream import Cluster
from openkeel_compute.db import api as db_api
from openkeel_compute.db.models import INSTANCES

LOG = logging.getLogger(__name__)
INVALID_TOKEN = "The token '***' is invalid or has expired"


class Refused(Exception):
    pass


def check(engine, token: str | None, headers, *, allowed_origins: tuple[str, ...] = ()) -> dict[str, Any]:
    """The console a websocket may reach: {"namespace", "vm_name", "subresource", "instance_uuid"}; raises
    Refused with Nova's message otherwise."""
    with db_api.reader(engine) as conn:
        found = remote_consoles.validate(conn, token or "")
        if found is None:
            raise Refused(INVALID_TOKEN)
        _check_origin(headers, allowed_origins)
        row = conn.execute(sa.select(INSTANCES.c.namespace, INSTANCES.c.vm_name, INSTANCES.c.node, INSTANCES.c.host)
                           .where(INSTANCES.c.uuid == found.instance_uuid, INSTANCES.c.deleted == 0)).first()
    if row is None or (row.node or row.host) != found.host or not row.namespace or not row.vm_name:
        # Nova's compute refuses the port (the server moved, or never reached the node): the same token error
        raise Refused(INVALID_TOKEN)
    subresource = remote_consoles.SUBRESOURCE.get(found.console_type, "vnc")
    if found.internal_access_path:  # the protocol's own subresource, named when the console was authorised
        subresource = found.internal_access_path.rsplit("/", 1)[1]
    return {"namespace": row.namespace, "vm_name": row.vm_name, "instance_uuid": found.instance_uuid,
            "subresource": subresource}


def _check_origin(headers, allowed_origins: tuple[str, ...]) -> None:
    origin = headers.get("Origin")
    if not origin:
        return
    parsed = parse.urlsplit(origin)
    if not parsed.hostname or not parsed.scheme:
        raise Refused("Origin header not valid.")
    expected = parse.urlsplit("//" + (headers.get("Host") or "")).hostname
    if parsed.hostname != expected and parsed.hostname not in allowed_origins:
        raise Refused("Origin header does not match this host.")


def token_of(path: str, cookie_header: str | None) -> str | None:
    query = parse.parse_qs(parse.urlsplit(path).query)
    if query.get("token"):
        return query["token"][0]
    if cookie_header:
        cookies: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
        try:
            cookies.load(cookie_header)
        except http.cookies.CookieError:
            return None
        if "token" in cookies:
            return cookies["token"].value
    return None


class ConsoleHandler(WebSockifyRequestHandler):
    server: ConsoleServer

    def translate_path(self, path: str) -> str:
        self.directory = self.server.web or os.devnull
        return super().translate_path(path)

    def do_GET(self) -> None:
        if self.server.web is None and (self.headers.get("Upgrade") or "").lower() != "websocket":
            body = (self.server.web_missing + "\n").encode()
            self.send_response(404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        LOG.info("%s %s", self.client_address[0], format % args)

    def new_websocket_client(self) -> None:
        try:
            target = check(self.server.engine, token_of(self.path, self.headers.get("Cookie")), self.headers,
                           allowed_origins=self.server.allowed_origins)
        except Refused as exc:
            # Nova's InvalidToken (or ValidationError) leaves websockify's handler: the connection is closed
            # with nothing sent, which is what Tempest's test_novnc_bad_token checks
            LOG.info("console refused: %s", exc)
            self.close_connection = True
            return
        try:
            upstream = self.server.cluster().open(target["namespace"], target["vm_name"], target["subresource"])
        except (OSError, websocket.WebSocketException) as exc:
            LOG.warning("console of %s: the cluster refused its %s subresource: %s", target["instance_uuid"],
                        target["subresource"], exc)
            raise self.CClose(1011, "Failed to connect to downstream server") from None
        LOG.info("console of %s: relaying to its %s subresource", target["instance_uuid"], target["subresource"])
        self._relay(upstream)

    def _relay(self, upstream: websocket.WebSocket) -> None:
        done = threading.Event()

        def downstream() -> None:
            try:
                while not done.is_set():
                    opcode, data = upstream.recv_data()
                    if opcode == websocket.ABNF.OPCODE_CLOSE:
                        break
                    if data:
                        self.send_frames([bytes(data)])
            except (OSError, websocket.WebSocketException):
                pass
            finally:
                done.set()
                with contextlib.suppress(Exception):  # the browser may have left already
                    self.send_close(1000, "the console closed")

        relay = threading.Thread(target=downstream, name="console-relay", daemon=True)
        relay.start()
        try:
            while not done.is_set():
                bufs, closed = self.recv_frames()
                for buf in bufs:
                    upstream.send(buf, opcode=websocket.ABNF.OPCODE_BINARY)
                if closed:
                    break
        except (OSError, websocket.WebSocketException):
            pass
        finally:
            done.set()
            with contextlib.suppress(Exception):  # already gone
                upstream.close(timeout=1)
            relay.join(2)


class ConsoleServer(ThreadingMixIn, HTTPServer):
    daemon_threads = True
    # what WebSockifyRequestHandler reads from its server
    only_upgrade = False
    verbose = False
    daemon = False
    record = ""
    run_once = False
    handler_id = 0
    file_only = True
    traffic = False
    web_auth = False
    host_token = False
    logger = logging.getLogger("openkeel_compute.consoles.websockify")

    def __init__(self, address: tuple[str, int], *, engine, kubeconfig: str, web: str | None, web_missing: str = "",
                 allowed_origins: tuple[str, ...] = ()) -> None:
        self.engine = engine
        self.kubeconfig = kubeconfig
        self.web = web
        self.web_missing = web_missing
        self.allowed_origins = allowed_origins
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, ConsoleHandler)

    def cluster(self) -> Cluster:
        """The kubeconfig is read for each console (the built-in cluster writes it once it listens, a new
        port after a restart)."""
        return Cluster.from_kubeconfig(self.kubeconfig)
