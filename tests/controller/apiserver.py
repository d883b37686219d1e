"""The built-in cluster in a process of its own (bench/controller_convergence.py: no GIL shared with the controller).

The controller's tests use ``openkeel_compute.emulator.Emulator`` directly (tests/controller/conftest.py);
this wrapper runs one in a forked child and answers a few questions over a pipe.
"""

from __future__ import annotations

import multiprocessing

from openkeel_compute.emulator import Delays, Emulator, Fault

__all__ = ["ApiServerProcess", "Fault", "RunningApiServer"]


class RunningApiServer(Emulator):
    """The test cluster under the name tests written before the emulator use: fast phases, quick ticks."""

    def __init__(self) -> None:
        super().__init__(delays=Delays.fast(), tick=0.01)


def _serve_in_child(conn) -> None:
    server = Emulator(delays=Delays.fast(), read_images=False).start()  # its image URLs are never served
    conn.send(server.port)
    while True:
        command, args = conn.recv()
        if command == "stop":
            server.stop()
            conn.send(None)
            return
        if command == "seed":
            conn.send(server.seed(args))
        elif command == "count":
            conn.send(len(server.objects(args)))
        elif command == "writes":
            conn.send(len(server.writes))


class ApiServerProcess:
    """An Emulator in a forked process; ``seed``, ``count``, ``writes`` and ``stop`` go over a pipe."""

    def __init__(self) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(target=_serve_in_child, args=(child,),
                                                                    daemon=True)
        self._process.start()
        self.port = self._conn.recv()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self) -> dict:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "emulated",
                "clusters": [{"name": "emulated", "cluster": {"server": self.url}}],
                "users": [{"name": "emulated", "user": {}}],
                "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "emulated"}}]}

    def _ask(self, command: str, args=None):
        self._conn.send((command, args))
        return self._conn.recv()

    def seed(self, obj: dict) -> dict:
        return self._ask("seed", obj)

    def count(self, kind: str) -> int:
        return self._ask("count", kind)

    def writes(self) -> int:
        return self._ask("writes")

    def stop(self) -> None:
        self._ask("stop")
        self._process.join(10)
