"""KubeVirt's VNC and serial console subresources of a running VMI, as websockets.

``GET /apis/subresources.kubevirt.io/v1/namespaces/NS/virtualmachineinstances/NAME/vnc`` (and ``/console``)
with ``Upgrade: websocket`` is answered as virt-api answers it: 404 for a VMI that does not exist, 400
"VMI is not running" before it runs, else the socket switches protocols (``plain.kubevirt.io``, binary
frames) and carries the guest's display or serial port.

The display is a small RFB 3.8 server (no authentication), enough for noVNC or any VNC client to connect
and draw: a dark screen with one bar per line of the guest's console (its text is not rendered: a bar as
long as the line). The serial console shows the last lines the guest printed and echoes what is typed,
as a login prompt's terminal does (a carriage return ends the line).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from websockify.websocket import WebSocket, WebSocketWantWriteError

from openkeel_compute.emulator.store import ApiError

LOG = logging.getLogger(__name__)
SUBPROTOCOLS = ("plain.kubevirt.io", "binary.kubevirt.io")
WIDTH, HEIGHT = 640, 400
CONSOLE_VERBS = ("vnc", "console")


class _Socket(WebSocket):
    def select_subprotocol(self, protocols):
        for protocol in (p.strip() for p in protocols):
            if protocol in SUBPROTOCOLS:
                return protocol
        return ""


def check_running(vmi: dict[str, Any] | None, ns: str, name: str) -> None:
    if vmi is None:
        raise ApiError(404, f'virtualmachineinstance.kubevirt.io "{name}" not found',
                       details={"name": name, "group": "kubevirt.io", "kind": "virtualmachineinstance"})
    if (vmi.get("status") or {}).get("phase") != "Running":
        raise ApiError(400, "Internal error occurred: VMI is not running", reason="BadRequest")


def serve(connection: socket.socket, headers, verb: str, console_lines: Callable[[], list[str]],
          stopping: threading.Event) -> None:
    """Accept the websocket on ``connection`` and serve the display (vnc) or the serial port (console) until
    the client leaves or the emulator stops."""
    ws = _Socket()
    ws.accept(connection, headers)
    try:
        if verb == "vnc":
            _Rfb(ws, console_lines, stopping).run()
        else:
            _Serial(ws, console_lines, stopping).run()
    except (OSError, EOFError, ConnectionError) as exc:
        LOG.debug("console websocket ended: %s", exc)
    finally:
        with contextlib.suppress(Exception):  # already gone
            ws.close()


class _Stream:
    """Bytes over websocket messages: reads exactly n bytes, whatever the framing."""

    def __init__(self, ws: WebSocket, stopping: threading.Event) -> None:
        self.ws, self.stopping, self.buffer = ws, stopping, b""

    def read_some(self) -> bytes | None:
        """One message's bytes; b"" on a timeout; None when the client closed."""
        while True:
            if self.stopping.is_set():
                return None
            if not self.ws.pending() and not select.select([self.ws.socket], [], [], 0.5)[0]:
                return b""
            return self.ws.recvmsg()

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            data = self.read_some()
            if data is None:
                raise EOFError("client closed")
            self.buffer += data
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, data: bytes) -> None:
        while True:
            try:
                self.ws.sendmsg(data)
                return
            except WebSocketWantWriteError:
                continue


class _Rfb:
    def __init__(self, ws: WebSocket, console_lines: Callable[[], list[str]], stopping: threading.Event) -> None:
        self.io = _Stream(ws, stopping)
        self.lines = console_lines
        # 32 bits per pixel, depth 24, little-endian, true colour, red at bit 16 (until SetPixelFormat)
        self.bpp, self.big_endian, self.shifts = 32, False, (16, 8, 0)
        self.maxes = (255, 255, 255)

    def run(self) -> None:
        io = self.io
        io.send(b"RFB 003.008\n")
        io.read(12)
        io.send(bytes([1, 1]))  # one security type: None
        io.read(1)
        io.send(struct.pack(">I", 0))  # SecurityResult OK
        io.read(1)  # ClientInit (shared flag)
        name = b"openkeel emulated guest"
        io.send(struct.pack(">HHBBBBHHHBBB3x", WIDTH, HEIGHT, 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
                + struct.pack(">I", len(name)) + name)
        sent_full = False
        while True:
            kind = io.read(1)[0]
            if kind == 0:  # SetPixelFormat
                data = io.read(19)
                bpp, _depth, big, _true, rmax, gmax, bmax, rs, gs, bs = struct.unpack(">3xBBBBHHHBBB3x", data)
                self.bpp, self.big_endian, self.maxes, self.shifts = bpp, bool(big), (rmax, gmax, bmax), (rs, gs, bs)
            elif kind == 2:  # SetEncodings
                _pad, count = struct.unpack(">BH", io.read(3))
                io.read(4 * count)
            elif kind == 3:  # FramebufferUpdateRequest
                incremental, _x, _y, _w, _h = struct.unpack(">BHHHH", io.read(9))
                if not incremental or not sent_full:
                    io.send(self._frame())
                    sent_full = True
                else:
                    io.send(struct.pack(">BxH", 0, 0))  # nothing changed
            elif kind == 4:  # KeyEvent
                io.read(7)
            elif kind == 5:  # PointerEvent
                io.read(5)
            elif kind == 6:  # ClientCutText
                (length,) = struct.unpack(">3xI", io.read(7))
                io.read(length)
            else:
                raise EOFError(f"unknown RFB client message {kind}")

    def _pixel(self, rgb: tuple[int, int, int]) -> bytes:
        value = 0
        for channel, top, shift in zip(rgb, self.maxes, self.shifts, strict=True):
            value |= (channel * top // 255) << shift
        size = max(1, self.bpp // 8)
        return value.to_bytes(size, "big" if self.big_endian else "little")

    def _frame(self) -> bytes:
        """One raw rectangle of the whole screen: dark blue, one light bar per console line."""
        background, ink = self._pixel((16, 24, 48)), self._pixel((200, 220, 200))
        rows: list[bytes] = []
        lines = self.lines()[-(HEIGHT // 16):]
        for y in range(HEIGHT):
            line_no, within = divmod(y, 16)
            if line_no < len(lines) and 4 <= within < 12:
                length = min(WIDTH - 16, len(lines[line_no]) * 8)
                rows.append(background * 8 + ink * length + background * (WIDTH - 8 - length))
            else:
                rows.append(background * WIDTH)
        header = struct.pack(">BxH", 0, 1) + struct.pack(">HHHHi", 0, 0, WIDTH, HEIGHT, 0)
        return header + b"".join(rows)


class _Serial:
    def __init__(self, ws: WebSocket, console_lines: Callable[[], list[str]], stopping: threading.Event) -> None:
        self.io = _Stream(ws, stopping)
        self.lines = console_lines

    def run(self) -> None:
        tail = self.lines()[-24:]
        self.io.send(("\r\n".join(tail) + "\r\n").encode("utf-8", "replace"))
        while True:
            data = self.io.read_some()
            if data is None:
                return
            if data:
                self.io.send(data.replace(b"\r", b"\r\n"))
