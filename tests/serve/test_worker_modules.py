"""A started API worker holds only what serving the API uses: the clients of other services (keystoneauth
and requests under it, the Kubernetes clients, Placement) are imported when something first needs them.

Each module a worker imports stays resident in every worker of every replica; these checks run a real
worker in a child process and read its ``sys.modules`` after it answered requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.serve.helpers import free_port, serve_conf

CLI = [sys.executable, "-m", "openkeel_compute.cmd.main"]

# Top-level packages no API worker may hold after start-up and the reads below (noauth2).
NOT_AT_START = ("keystoneauth1", "keystonemiddleware", "requests", "urllib3", "charset_normalizer", "kubernetes",
                "lightkube", "httpx", "placement", "alembic", "mako", "oslo_messaging", "kombu",
                "re2")  # RE2: loaded by the first regular-expression filter (see below)
# What the controller and the clients of other services are made of, inside OpenKeel.
OWN_NOT_AT_START = ("openkeel_compute.emulator", "openkeel_compute.controller.service",
                    "openkeel_compute.controller.images", "openkeel_compute.images.glance",
                    "openkeel_compute.placement", "openkeel_compute.db.migration",
                    # the KubeVirt mapping's tables: the first boot or resize imports them
                    "openkeel_compute.kubevirt.mapping", "openkeel_compute.kubevirt.image",
                    "openkeel_compute.kubevirt.rules", "openkeel_compute.kubevirt.guard")

# Runs `openkeel-compute serve` (one worker: it serves from this very process) in the main thread; a
# thread waits for it to answer, sends the reads, writes sys.modules to a file, then stops the server.
PROBE = """
import json, os, signal, sys, threading, time, urllib.request
port, out, conf = int(sys.argv[1]), sys.argv[2], sys.argv[3]
paths = sys.argv[4:]

def probe():
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.1)
    statuses = {}
    for path in paths:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={
            "X-Auth-Token": "admin:admin-project", "OpenStack-API-Version": "compute 2.96"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            resp.read()
            statuses[path] = resp.status
    with open(out, "w") as f:
        json.dump({"modules": sorted(sys.modules), "statuses": statuses}, f)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
from openkeel_compute.cmd.main import main
main(["serve", "--config-file", conf, "--port", str(port), "--workers", "1"])
"""

READS = ["/v2.1/flavors/detail", "/v2.1/flavors", "/v2.1/servers/detail", "/v2.1/servers", "/v2.1/os-keypairs",
         "/v2.1/os-availability-zone", "/v2.1/limits"]


def _held(modules: list[str], names) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_a_started_worker_holds_no_client_of_other_services(tmp_path):
    conf = serve_conf(tmp_path)
    subprocess.run(CLI + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(free_port()), str(out), conf, *READS],
                          check=False, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"the worker did not answer the reads: {proc.stdout}{proc.stderr}"
    seen = json.loads(out.read_text())
    assert seen["statuses"] == {path: 200 for path in READS}
    modules = seen["modules"]
    assert "openkeel_compute.api.deploy" in modules and "falcon" in modules  # the probe saw a real worker
    assert _held(modules, NOT_AT_START) == []
    assert _held(modules, OWN_NOT_AT_START) == []


def test_the_first_pattern_filter_loads_re2(tmp_path):
    conf = serve_conf(tmp_path)
    subprocess.run(CLI + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    out = tmp_path / "modules.json"
    reads = ["/v2.1/flavors", "/v2.1/servers/detail?name=web-.*"]
    proc = subprocess.run([sys.executable, "-c", PROBE, str(free_port()), str(out), conf, *reads],
                          check=False, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"the worker did not answer the reads: {proc.stdout}{proc.stderr}"
    seen = json.loads(out.read_text())
    assert seen["statuses"] == {path: 200 for path in reads}
    assert "re2" in seen["modules"]


def test_the_wsgi_module_alone_holds_none_either(tmp_path):
    """What each forked worker of several imports (openkeel_compute.wsgi builds the application)."""
    conf = serve_conf(tmp_path)
    probe = "import json, sys, openkeel_compute.wsgi; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ,
                                                               "OPENKEEL_CONFIG_FILES": conf},
                         check=True, capture_output=True, text=True).stdout
    modules = json.loads(out.splitlines()[-1])
    assert "openkeel_compute.api.deploy" in modules
    assert _held(modules, NOT_AT_START + OWN_NOT_AT_START) == []


def test_the_clients_still_load_when_used(tmp_path):
    """Deferred, not dropped: the options of [glance], [service_user] and [placement] are registered by the
    code that reads them, with the values of the files parsed at start."""
    from openkeel_compute.conf import build_conf
    from openkeel_compute.controller import images
    from openkeel_compute.images import glance
    from openkeel_compute.placement import client as placement

    path = tmp_path / "c.conf"
    path.write_text("[glance]\napi_servers = http://glance.test:9292\nnum_retries = 7\n"
                    "[service_user]\nauth_type = admin_token\ntoken = t\nendpoint = http://glance.test:9292\n"
                    "[placement]\nauth_type = admin_token\ntoken = p\nendpoint_override = http://placement.test\n")
    conf = build_conf(["--config-file", str(path)])
    assert glance.GlanceClient(conf).conf.glance.num_retries == 7
    access = images.ImageAccess.from_conf(conf)
    assert access.token() == "t"
    assert access.endpoint() == "http://glance.test:9292"
    assert placement.configured(conf)
