"""Database servers of the run's own, in a temporary directory on a port of its choosing, which the
restart runs stop and start at will (never the machine's shared servers)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time


def _wait_port(port: int, up: bool, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.closing(socket.socket()) as sock:
            sock.settimeout(0.5)
            if (sock.connect_ex(("127.0.0.1", port)) == 0) == up:
                return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} did not go {'up' if up else 'down'} within {timeout:.0f} s")


class OwnPostgres:
    """initdb into a temporary directory (as the postgres user when run as root), trust auth."""

    def __init__(self, port: int):
        self.port = port
        self.dir = tempfile.mkdtemp(prefix="openkeel-reliability-pg-")
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            raise RuntimeError("PostgreSQL server binaries (/usr/lib/postgresql/*/bin) are not installed")
        self.bin = bins[-1]
        self.data = os.path.join(self.dir, "data")
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run([*self._as, f"{self.bin}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        subprocess.run([*self._as, f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"),
                        "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "-w", "start"],
                       check=True, capture_output=True)
        _wait_port(self.port, True)

    def stop(self) -> None:
        subprocess.run([*self._as, f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"],
                       check=False, capture_output=True)
        _wait_port(self.port, False)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class OwnMariaDB:
    """mariadb-install-db into a temporary directory; root without a password on TCP."""

    def __init__(self, port: int):
        self.port = port
        self.dir = tempfile.mkdtemp(prefix="openkeel-reliability-my-")
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "sock")
        self.proc: subprocess.Popen | None = None
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.data}", "--auth-root-authentication-method=normal",
                        "--user=root", "--skip-test-db"], check=True, capture_output=True)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/mysql?charset=utf8mb4"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={self.data}", f"--port={self.port}", "--bind-address=127.0.0.1",
             f"--socket={self.socket}", "--user=root", f"--pid-file={self.dir}/pid",
             "--innodb-buffer-pool-size=32M"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "log"), "ab"))
        _wait_port(self.port, True)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(60)
            self.proc = None
        _wait_port(self.port, False)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def own_database(kind: str, port: int):
    return OwnPostgres(port) if kind == "postgresql" else OwnMariaDB(port)
