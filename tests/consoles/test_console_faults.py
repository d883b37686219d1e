"""Console tokens and sessions when the server is deleted, on the scripts/serve stack (vnc and serial).

Nova 34.0.0: a token is checked at each connection (nova/console/websocketproxy.py ``_get_connect_info``:
``ConsoleAuthToken.validate``, any number of times until it expires); the compute deleting a server deletes
its tokens (``_clean_instance_console_tokens``), so a replay afterwards is refused (the connection dropped,
websockify's handler leaving on InvalidToken) and ``GET /os-console-auth-tokens/{token}`` is 404 "Token not
found"; a session open when the guest goes ends with the guest's display or serial port. Nothing of a
deleted server stays reachable through the proxy."""

from __future__ import annotations

import re
import time

import websocket

from tests.consoles.conftest import boot
from tests.consoles.test_console_proxy import console_url, delete, dropped, rfb_handshake, websocket_of

TOKEN = re.compile(r"token(?:=|%3D)([0-9a-f-]{36})")


def _token(url: str) -> str:
    match = TOKEN.search(url)
    assert match, url
    return match.group(1)


def _ends(ws: websocket.WebSocket, timeout: float = 30.0) -> bool:
    """The session ends (a close frame or the connection dropped) within ``timeout`` seconds."""
    ws.settimeout(1.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            frame = ws.recv_frame()
        except websocket.WebSocketTimeoutException:
            continue
        except (websocket.WebSocketConnectionClosedException, OSError):
            return True
        if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
            return True
    return False


def test_sessions_end_and_tokens_die_with_their_server(stack):
    server_id = boot(stack, "deleted-with-consoles")
    vnc = console_url(stack, server_id)
    serial = console_url(stack, server_id, "serial", "serial")
    tokens = [_token(vnc), _token(serial)]
    for token in tokens:  # replayed: still good while the server lives (os-console-auth-tokens, admin)
        for _ in range(2):
            status, body = stack.call("GET", f"/v2.1/os-console-auth-tokens/{token}", version="2.31")
            assert status == 200 and body["console"]["instance_uuid"] == server_id, body
    open_vnc = websocket_of(stack, vnc)
    rfb_handshake(open_vnc)
    open_serial = websocket_of(stack, serial)
    again = websocket_of(stack, vnc)  # a second connection with the same token: as Nova, allowed
    again.close()
    delete(stack, server_id)
    # the sessions open on the deleted server's display and serial port end with them
    assert _ends(open_vnc) and _ends(open_serial)
    # replays after the delete: refused at the proxy, unknown to os-console-auth-tokens
    assert dropped(websocket_of(stack, vnc)) and dropped(websocket_of(stack, serial))
    for token in tokens:
        status, body = stack.call("GET", f"/v2.1/os-console-auth-tokens/{token}", version="2.31")
        assert (status, body) == (404, {"itemNotFound": {"code": 404, "message": "Token not found"}})
