"""The database goes away under a running controller and comes back: the controller rides it.

A real outage: the controller runs as its own process (``openkeel-compute controller``, as scripts/serve
and a deployment run it) on a PostgreSQL or MariaDB server of this test's own (tests/databases.py
``own_database_server``), which is stopped while a build is under way and started again. The process
must not exit, must keep renewing its Lease meanwhile, and must finish the build once the database is
back; its log says once that the database went and once that it came back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf, placement_section
from tests.controller.helpers import active, boot, row_of
from tests.databases import own_database_server

IDENTITY = "outage-test-controller"


def _tail(log) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


def _renewed(apiserver) -> str | None:
    leases = [o for o in apiserver.objects("Lease").values() if o["spec"].get("holderIdentity") == IDENTITY]
    return leases[0]["spec"].get("renewTime") if leases else None


def _until(what, process, log, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the controller exited ({process.returncode}):\n{_tail(log)}"
        found = what()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not reached in {timeout:.0f} s:\n{_tail(log)}")


@pytest.mark.parametrize("engine_name", ["postgresql", "mariadb"])
def test_the_controller_rides_a_database_outage(engine_name, tmp_path, apiserver, placement_service):
    with own_database_server(engine_name, tmp_path / "database") as database:
        conf = make_conf(tmp_path, database={"connection": database.url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(apiserver.kubeconfig()))
        extra = tmp_path / "controller.conf"
        extra.write_text(f"[controller]\nidentity = {IDENTITY}\nlease_duration = 3\nlease_renew_interval = 0.2\n"
                         "metrics_port = 0\npoll_interval = 0.05\nworkers = 1\n"
                         "[glance]\napi_servers = http://127.0.0.1:9292\n" + placement_section(placement_service))
        log = tempfile.TemporaryFile()  # noqa: SIM115 - gone with the test
        process = subprocess.Popen(
            [sys.executable, "-m", "openkeel_compute.cmd.main", "controller", "--config-file", conf.config_file[0],
             "--config-file", str(extra), "--kubeconfig", str(kubeconfig)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, stdout=subprocess.DEVNULL, stderr=log)
        try:
            first = boot(engine)
            _until(lambda: active(row_of(engine, first)), process, log)
            second = boot(engine)  # under way when the database goes
            db_api.dispose_all()
            database.stop()
            renewed = _renewed(apiserver)
            time.sleep(6)  # many passes, and longer than the Lease's duration
            assert process.poll() is None, f"the controller exited ({process.returncode}):\n{_tail(log)}"
            assert _renewed(apiserver) not in (None, renewed), "the Lease was not renewed while the database was away"
            database.start()
            _until(lambda: active(row_of(engine, second)), process, log)
            assert active(row_of(engine, first))
            text = _tail(log)
            assert text.count("the database cannot be used") == 1, text
            assert "the database is back" in text, text
            assert "Traceback" not in text, text
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
            db_api.dispose_all()
        assert process.returncode == 0, _tail(log)
