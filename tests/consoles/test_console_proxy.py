"""The console proxy end to end on a scripts/serve stack: the URL the API hands out is served (noVNC's page),
its websocket reaches the server's VNC display in the built-in cluster (the RFB handshake through the proxy)
and the serial console echoes a typed line; tokens are refused as nova-novncproxy refuses them (forged,
expired, the server deleted, another host's Origin), and replayed ones work until they expire, as Nova's.
A real browser (Debian's chromium) showing noVNC connected is tests/consoles/test_browser.py."""

from __future__ import annotations

import re
import struct
import time
import urllib.request
from urllib import parse

import pytest
import websocket

from openkeel_compute.consoles import novnc
from tests.consoles.conftest import boot


def console_url(stack, server_id: str, protocol: str = "vnc", kind: str = "novnc") -> str:
    status, body = stack.call("POST", f"/v2.1/servers/{server_id}/remote-consoles",
                              {"remote_console": {"protocol": protocol, "type": kind}}, token="demo:demo")
    assert status == 200, body
    return body["remote_console"]["url"]


def websocket_of(stack, url: str, origin: str | None = None) -> websocket.WebSocket:
    """The websocket noVNC opens for ``url`` (its path parameter), or a serial URL itself."""
    parsed = parse.urlsplit(url)
    if parsed.scheme == "ws":
        target = url
    else:
        path = parse.parse_qs(parsed.query)["path"][0]
        target = f"ws://{parsed.netloc}/{path.lstrip('/')}"
    return websocket.create_connection(target, timeout=10, subprotocols=["binary"],
                                       origin=origin or f"http://{parsed.hostname}:{parsed.port}")


def closed_with(ws: websocket.WebSocket) -> tuple[int, str]:
    frame = ws.recv_frame()
    assert frame.opcode == websocket.ABNF.OPCODE_CLOSE, frame
    return struct.unpack(">H", frame.data[:2])[0], frame.data[2:].decode()


def dropped(ws: websocket.WebSocket) -> bool:
    """The connection ends with nothing sent, not even a close frame: Nova's proxy refusing a console (its
    InvalidToken leaves websockify's handler, which drops the connection; Tempest's test_novnc_bad_token)."""
    with pytest.raises(websocket.WebSocketConnectionClosedException):
        ws.recv_frame()
    return True


def delete(stack, server_id: str, timeout: float = 120.0) -> None:
    """The demo project deletes its server; returns once the API no longer shows it."""
    status, _ = stack.call("DELETE", f"/v2.1/servers/{server_id}", token="demo:demo")
    assert status == 204
    deadline = time.monotonic() + timeout
    while stack.call("GET", f"/v2.1/servers/{server_id}", token="demo:demo")[0] != 404:
        assert time.monotonic() < deadline, f"{server_id} still shown {timeout} s after its delete"
        time.sleep(0.2)


def rfb_handshake(ws: websocket.WebSocket) -> tuple[int, int, str]:
    buffer = b""

    def read(n: int) -> bytes:
        nonlocal buffer
        while len(buffer) < n:
            buffer += ws.recv()
        out, buffer = buffer[:n], buffer[n:]
        return out

    assert read(12) == b"RFB 003.008\n"
    ws.send_binary(b"RFB 003.008\n")
    count = read(1)[0]
    assert 1 in read(count)
    ws.send_binary(b"\x01")
    assert read(4) == b"\x00\x00\x00\x00"
    ws.send_binary(b"\x01")
    width, height = struct.unpack(">HH", read(4))
    read(16)
    (length,) = struct.unpack(">I", read(4))
    name = read(length).decode()
    ws.send_binary(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))
    kind, _pad, rects = struct.unpack(">BBH", read(4))
    assert (kind, rects) == (0, 1)
    _x, _y, w, h, encoding = struct.unpack(">HHHHi", read(12))
    assert (w, h, encoding) == (width, height, 0)
    read(w * h * 4)
    return width, height, name


def test_the_console_url_serves_novnc_and_its_websocket_reaches_the_guests_display(stack):
    if novnc.find(None) is None:
        pytest.skip(novnc.missing_message(None))
    server_id = boot(stack, "vnc")
    url = console_url(stack, server_id)
    assert re.match(rf"^http://127\.0\.0\.1:{stack.console_port}/vnc_auto\.html\?path=%3Ftoken%3D[0-9a-f-]{{36}}$",
                    url)
    with urllib.request.urlopen(url, timeout=10) as page:
        assert page.status == 200 and b"noVNC" in page.read()
    ws = websocket_of(stack, url)
    try:
        width, height, name = rfb_handshake(ws)
    finally:
        ws.close()
    assert (width, height, name) == (640, 400, "openkeel emulated guest")
    # a token is valid any number of times until it expires (Nova's, since its tokens are in the database)
    ws = websocket_of(stack, url)
    try:
        assert rfb_handshake(ws)[0] == 640
    finally:
        ws.close()


def test_the_serial_console_echoes_a_typed_line(stack):
    server_id = boot(stack, "serial")
    url = console_url(stack, server_id, "serial", "serial")
    assert url.startswith(f"ws://127.0.0.1:{stack.console_port}/?token=")
    ws = websocket_of(stack, url)
    try:
        banner = ws.recv()
        assert banner  # the guest's last console lines come first
        ws.send_binary(b"hello openkeel\r")
        echoed = b""
        deadline = time.monotonic() + 60  # ends as soon as the line is back
        while b"hello openkeel\r\n" not in echoed:
            assert time.monotonic() < deadline, echoed
            echoed += ws.recv()
    finally:
        ws.close()


def test_forged_expired_foreign_origin_and_deleted_tokens_are_refused(stack):
    server_id = boot(stack, "refusals")
    url = console_url(stack, server_id)
    forged = re.sub(r"token%3D[0-9a-f-]{36}", "token%3D" + "0" * 8 + "-0000-0000-0000-" + "0" * 12, url)
    assert dropped(websocket_of(stack, forged))
    assert dropped(websocket_of(stack, url, origin="http://evil.example:80"))
    ws = websocket_of(stack, url)  # still good
    ws.close()
    delete(stack, server_id)
    assert dropped(websocket_of(stack, url))


def test_a_server_not_running_closes_the_console_as_websockify_does(stack):
    server_id = boot(stack, "stopped")
    url = console_url(stack, server_id)
    status, _ = stack.call("POST", f"/v2.1/servers/{server_id}/action", {"os-stop": None}, token="demo:demo")
    assert status == 202
    stack.wait_status(server_id, "SHUTOFF", timeout=60, token="demo:demo")
    assert closed_with(websocket_of(stack, url)) == (1011, "Failed to connect to downstream server")
