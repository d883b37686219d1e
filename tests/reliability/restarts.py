"""A database stopped and started under write load, on a server of the run's own.

Writers create flavors, or boot servers and write to them (metadata, stop), through the API
without pause; each 200 (202 for a boot) is an acknowledged write. The
database goes down for a while and comes back; the same application (no process restart) goes on
serving. Afterwards every acknowledged flavor or server must be in the database (0 lost writes), and the
time from the database being up again to the first acknowledged write is the recovery time.
Answers while the database is down are counted apart: they may be errors (a 500 in Nova's fault
format, as Nova answers then), never a hang.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
import threading
import time

import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db.models import FLAVORS, INSTANCES
from tests.databases import own_database_server
from tests.reliability import world as w


@dataclasses.dataclass
class Report(w.WriteLoad):
    lost: int = 0
    errors_while_down: int = 0
    errors_after_recovery: int = 0  # 5xx to requests sent after the database was up again
    recovery_seconds: float | None = None

    def line(self, engine: str) -> str:
        recovery = f"{self.recovery_seconds:.2f}s" if self.recovery_seconds is not None else "never"
        return (f"restarts[{engine}]: requests={self.requests} acknowledged={self.acknowledged} "
                f"lost-writes={self.lost} 5xx-while-down={self.errors_while_down} "
                f"5xx-after-restart={self.errors_after_recovery} recovery={recovery} "
                f"slowest-answer={self.slowest_answer_seconds:.2f}s")


def run(kind: str, port: int, *, writers: int = 4, before: float = 3.0, outage: float = 3.0,
        after: float = 5.0, writes: str = "flavors") -> Report:
    """``writes``: "flavors" (flavor creates) or "servers" (boots, metadata and stops)."""
    report = Report()
    lock = threading.Lock()
    phase = {"name": "before", "up_at": None}
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="openkeel-reliability-", ignore_cleanup_errors=True) as tmp, \
            own_database_server(kind, pathlib.Path(tmp) / kind, port) as db:
        try:
            world = w.World(db.url, pathlib.Path(tmp))

            def record(flavorid: str, status: int, sent_at: float, seconds: float) -> None:
                with lock:
                    report.heard(flavorid, status, seconds)
                    if status == 200:
                        if phase["name"] == "after" and report.recovery_seconds is None:
                            report.recovery_seconds = time.monotonic() - phase["up_at"]
                    elif status >= 500:
                        # sent once the database was up again: a failure of recovery
                        if phase["up_at"] is not None and sent_at >= phase["up_at"]:
                            report.errors_after_recovery += 1
                        else:
                            report.errors_while_down += 1

            writer = w.create_flavors
            if writes == "servers":
                w.unlimited_quota(world)
                writer = w.server_writes
            threads = [threading.Thread(target=writer, args=(world, f"rs-{i}", stop, record), daemon=True)
                       for i in range(writers)]
            for thread in threads:
                thread.start()
            time.sleep(before)
            with lock:
                phase["name"] = "down"
            db.stop()
            time.sleep(outage)
            db.start()
            with lock:
                phase["name"], phase["up_at"] = "after", time.monotonic()
            time.sleep(after)
            stop.set()
            for thread in threads:
                thread.join(60)
            with db_api.reader(world.engine) as conn:
                if writes == "servers":
                    stored = {row[0] for row in conn.execute(sa.select(INSTANCES.c.uuid).where(
                        INSTANCES.c.deleted == 0))}
                else:
                    stored = {row[0] for row in conn.execute(sa.select(FLAVORS.c.flavorid))}
            report.lost = len(set(report.acknowledged_ids) - stored)
            world.close()
        finally:
            stop.set()
    return report
