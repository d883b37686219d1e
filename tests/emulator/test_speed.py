"""What keeps the emulated cluster fast enough for a controller booting many servers, checked without
timing anything (tests never assert timings: bench/emulator_boot.py measures the speed)."""

from __future__ import annotations

from openkeel_compute.emulator import server


def test_the_api_server_keeps_connections_and_answers_without_nagles_wait() -> None:
    """HTTP/1.1 keep-alive, so no connection is set up per request; headers and body leave in separate
    segments, so with Nagle's algorithm on each answer would wait for the client's delayed ACK (~40 ms)."""
    assert server._Handler.protocol_version == "HTTP/1.1"
    assert server._Handler.disable_nagle_algorithm is True
