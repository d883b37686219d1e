"""Each overlay's API, controller, console proxy and metadata service start from its configuration as rendered, and serve.

`kubectl kustomize` renders the overlay, and each pod's container runs here as its pod would
(tests/deploy/pods.py: the ConfigMap's files, the arguments and the environment exactly as
rendered). What this machine cannot be is replaced by a local stand-in, and nothing else: the
database Secret names a SQLite file, the in-cluster kubeconfig's API server is the built-in KubeVirt
cluster, Keystone's address is a stand-in's (tests/deploy/keystone.py) whose catalog names a local
Placement (Placement's own service, embedded), and the ports are free ones (a pod has a network of
its own). The API must answer `/`, a user's token, and refuse a request without one; the controller
must hold its Lease and publish the cluster's node as a resource provider; the console proxy must serve
noVNC's page (when noVNC is installed here, as the image has it) and check a console's token against the
database of the Secret (an unknown one is refused with Nova's message); the metadata service must answer
the EC2 versions and find no server behind an address the database does not know.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import websocket

from openkeel_compute.consoles import novnc
from openkeel_compute.emulator import Emulator
from openkeel_compute.placement import embedded
from tests.deploy.conftest import NAMESPACE, find
from tests.deploy.keystone import Keystone
from tests.deploy.pods import Pod, rendered_secrets
from tests.processes import stop_group
from tests.scripts.checkout import free_port

CONFIG = "/etc/openkeel-compute"
IN_CLUSTER = "https://kubernetes.default.svc"
OPERATOR_PASSWORD = "password-of-the-operator's-secret"
START_TIMEOUT = 90


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    headers = {"X-Auth-Token": token} if token else {}
    headers["OpenStack-API-Version"] = "placement latest" if "/resource_providers" in url else "compute 2.1"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if resp.headers.get_content_type() == "application/json" else {}
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def _until(what: str, check, procs: dict[str, subprocess.Popen], logs, timeout: float = START_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited {proc.returncode} before {what}:\n{logs()}"
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"not {what} after {timeout} s:\n{logs()}"
        time.sleep(0.3)


def _apply(cluster: str, obj: dict) -> None:
    req = urllib.request.Request(f"{cluster}/api/v1/namespaces", data=json.dumps(obj).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 201


def _probe(probe: dict, ports: dict[str, int]) -> bool:
    """An httpGet or tcpSocket probe against the named port's local stand-in."""
    if "httpGet" in probe:
        return _get(f"http://127.0.0.1:{ports[probe['httpGet']['port']]}{probe['httpGet']['path']}")[0] == 200
    with socket.create_connection(("127.0.0.1", ports[probe["tcpSocket"]["port"]]), timeout=5):
        return True


def _page(url: str) -> tuple[int, bytes] | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _keystone_base(pod: Pod) -> str | None:
    """Scheme and host of the Keystone the overlay's site.conf names (None: it names none)."""
    site = configparser.ConfigParser(interpolation=None)
    site.read_string(pod.file(CONFIG, "site.conf").read_text())
    if not site.has_option("keystone_authtoken", "auth_url"):
        return None
    parts = urllib.parse.urlsplit(site["keystone_authtoken"]["auth_url"])
    return f"{parts.scheme}://{parts.netloc}"


@pytest.mark.parametrize("overlay", ["production", "dev"])
def test_the_api_the_controller_and_the_console_proxy_start_as_rendered_and_serve(rendered, overlay, tmp_path):
    objects = rendered[overlay]
    generated = rendered_secrets(objects)
    password = generated.get(("openkeel-compute-keystone", "password"), OPERATOR_PASSWORD)
    secrets = {("openkeel-compute-database", "connection"): f"sqlite:///{tmp_path}/openkeel.sqlite",
               ("openkeel-compute-keystone", "password"): password}
    api = Pod(objects, "Deployment", "openkeel-compute-api", tmp_path / "api", secrets)
    controller = Pod(objects, "Deployment", "openkeel-compute-controller", tmp_path / "controller", secrets)
    sync = Pod(objects, "Job", "openkeel-compute-db-sync", tmp_path / "db-sync", secrets)
    wait = Pod(objects, "Deployment", "openkeel-compute-api", tmp_path / "wait", secrets, container="wait-for-schema")
    proxy = Pod(objects, "Deployment", "openkeel-compute-console-proxy", tmp_path / "console-proxy", secrets)
    metadata = Pod(objects, "Deployment", "openkeel-compute-metadata", tmp_path / "metadata", secrets)
    keystone_base = _keystone_base(api)
    procs: dict[str, subprocess.Popen] = {}
    log_paths = {name: tmp_path / f"{name}.log" for name in ("api", "controller", "console-proxy", "metadata")}

    def logs() -> str:
        return "\n".join(f"--- {name}\n{path.read_text(errors='replace')[-6000:]}"
                         for name, path in log_paths.items() if path.exists())

    placement = embedded.start(tmp_path / "placement")
    try:
        with Keystone() as keystone, Emulator() as cluster, contextlib.ExitStack() as running:
            keystone.add_user("openkeel-compute", password)
            keystone.add_service("placement", placement.url)
            for pod in (api, controller, sync, wait) if keystone_base else ():
                pod.edit(CONFIG, "site.conf", keystone_base, keystone.url)
            for pod in (controller, proxy):
                pod.edit(CONFIG, "in-cluster.kubeconfig", IN_CLUSTER, cluster.url)
            _apply(cluster.url, find(objects, "Namespace", NAMESPACE))  # kubectl apply -k makes it first

            # A pod has a network of its own; here each named port is a free one.
            ports = {"compute-api": free_port(), "metrics": free_port(), "console": free_port(),
                     "metadata": free_port()}

            def start(name: str, pod: Pod, **extra: str) -> None:
                with log_paths[name].open("wb") as log:
                    procs[name] = subprocess.Popen(pod.argv(), env=pod.environ(**extra), stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True)
                running.callback(stop_group, procs[name])

            # The db-sync Job; the controller (it waits for nothing); the API's init container, then the API.
            for job in (sync, wait):
                done = subprocess.run(job.argv(), env=job.environ(), capture_output=True, text=True, timeout=120,
                                      check=False)
                assert done.returncode == 0, done.stdout + done.stderr
                if job is sync:
                    start("controller", controller, OS_CONTROLLER__METRICS_PORT=str(ports["metrics"]))
            start("api", api, OS_WSGI__PORT=str(ports["compute-api"]))
            # The proxy's one port serves noVNC and the serial consoles (console-proxy.conf): both moved together.
            start("console-proxy", proxy, OS_VNC__NOVNCPROXY_PORT=str(ports["console"]),
                  OS_SERIAL_CONSOLE__SERIALPROXY_PORT=str(ports["console"]))
            start("metadata", metadata, OS_DEFAULT__METADATA_LISTEN_PORT=str(ports["metadata"]))

            assert (api.port("compute-api"), controller.port("metrics")) == (8774, 9465)  # what the probes reach
            assert proxy.port("console") == 6080
            assert metadata.port("metadata") == 8775
            url = f"http://127.0.0.1:{ports['compute-api']}"
            _until("answering /", lambda: _get(url + "/")[0] == 200, procs, logs)
            user = keystone.issue("a-user", "a-project", ["member", "reader"])
            assert _get(url + "/v2.1/flavors", user) == (200, {"flavors": []}), logs()
            assert _get(url + "/v2.1/flavors")[0] == 401

            lease = f"{cluster.url}/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/openkeel-compute-controller"
            holder = _until("holding its Lease", lambda: _get(lease)[1].get("spec", {}).get("holderIdentity"),
                            procs, logs)
            assert holder == controller.name
            providers = _until("publishing the node", lambda: _get(
                placement.url + "/resource_providers?name=emulated-node-1", embedded.TOKEN)[1].get(
                "resource_providers"), procs, logs)
            inventories = _get(f"{placement.url}/resource_providers/{providers[0]['uuid']}/inventories",
                               embedded.TOKEN)[1]["inventories"]
            assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= set(inventories), inventories
            # Both logged in as the service user with the Secret's password (the stand-in checks it).
            assert ("openkeel-compute", "service") in keystone.logins
            # The console proxy: noVNC's page, and a websocket whose token the database does not know.
            console = f"127.0.0.1:{ports['console']}"
            web = novnc.find(None)
            page = _until("serving the console page", lambda: _page(f"http://{console}/vnc_auto.html"), procs, logs)
            if web is not None:
                assert page[0] == 200 and b"noVNC" in page[1], (page, logs())
            else:  # this machine has no noVNC (the image has): the page says so, serial consoles still work
                assert page[0] == 404 and b"install noVNC" in page[1], (page, logs())
            refused = websocket.create_connection(f"ws://{console}/?token=0c7f5f0e-0000-4000-8000-000000000000",
                                                  timeout=10, subprotocols=["binary"])
            with pytest.raises(websocket.WebSocketConnectionClosedException):  # dropped, as Nova's proxy does
                refused.recv_frame()
            assert "The token '***' is invalid or has expired" in log_paths["console-proxy"].read_text(), logs()
            # The metadata service: the EC2 versions to anyone; no server has this test's address.
            meta = f"http://127.0.0.1:{ports['metadata']}"
            versions = _until("answering /", lambda: _page(meta + "/"), procs, logs)
            assert versions[0] == 200 and b"2009-04-04" in versions[1], (versions, logs())
            assert _page(meta + "/openstack/latest/meta_data.json")[0] == 404, logs()
            # The probes as rendered pass: a pod failing them would never be ready, or be restarted.
            for pod in (api, controller, metadata, *((proxy,) if web is not None else ())):
                for kind in ("readinessProbe", "livenessProbe"):
                    if kind in pod.container:
                        assert _probe(pod.container[kind], ports), (pod.container["name"], kind, logs())
    finally:
        placement.stop()
