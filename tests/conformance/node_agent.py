"""The network agent of the built-in cluster's nodes, played by the conformance tier.

In a real cloud an L2 agent on each compute node (neutron-openvswitch-agent, OVN's controller) sees a VM's
interface appear on the node and tells Neutron the device is up; Neutron then marks the port ACTIVE and sends
``network-vif-plugged`` to the compute API, which is what a build waits for. It reports the device down
when the interface goes (``network-vif-unplugged``). The built-in cluster has no dataplane, so this process
plays that agent for the tier's nodes, at the protocol level on both sides:

- the cluster: the Kubernetes API of the built-in cluster (``GET /apis/kubevirt.io/v1/virtualmachineinstances``):
  a VMI's interfaces as KubeVirt lists them in ``status.interfaces`` (a secondary network's entry may carry no
  MAC while Multus alone reports it: the MAC is then the one of the spec's interface of that name), on the
  node of ``status.nodeName``;
- Neutron: the compute ports bound to one of the nodes (``binding:host_id``), read through its API as the
  cloud admin; the report is the agent's RPC (``update_device_up`` / ``update_device_down``) as the Neutron
  recipe's ``plug`` / ``unplug`` (``neutron-up.sh``) send it: with ``--neutron-python`` and
  ``--neutron-conf`` from one long-lived process (node_agent_rpc.py, Neutron imported once), else by running
  the recipe's ``plug`` / ``unplug`` for each report (a Python start with Neutron's imports each: 3-25 s
  on the loaded machine).

A port bound to a node, DOWN, whose MAC is an interface of a VMI on that node is reported up; a port bound to
a node, ACTIVE, whose MAC no VMI on that node has any more is reported down. A report that Neutron did not
follow is sent again after ``RETRY`` seconds.

Run by scripts/conformance with the tempest venv's Python (keystoneauth1); the decision (``decide``) uses
nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import pathlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

LOG = logging.getLogger("node-agent")
RETRY = 20.0  # seconds after which a report Neutron did not follow is sent again
VMIS = "/apis/kubevirt.io/v1/virtualmachineinstances"
PORT_FIELDS = ("id", "mac_address", "status", "binding:host_id", "binding:vif_type", "device_owner")


def interfaces_on_nodes(vmis: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(node, MAC) of every interface a VMI lists in its status, on the node it runs on."""
    found = set()
    for vmi in vmis:
        status = vmi.get("status") or {}
        node = status.get("nodeName")
        if not node or status.get("phase") not in ("Scheduled", "Running"):
            continue
        spec_macs = {i.get("name"): i.get("macAddress")
                     for i in ((vmi.get("spec") or {}).get("domain") or {}).get("devices", {}).get("interfaces") or ()}
        for entry in status.get("interfaces") or ():
            mac = entry.get("mac") or spec_macs.get(entry.get("name"))
            if mac:
                found.add((str(node), str(mac).lower()))
    return found


def decide(vmis: Iterable[Mapping[str, Any]], ports: Iterable[Mapping[str, Any]],
           nodes: Iterable[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(ports to report up, ports to report down), each as (port id, node)."""
    present = interfaces_on_nodes(vmis)
    ours = set(nodes)
    up, down = [], []
    for port in ports:
        node = port.get("binding:host_id") or ""
        if node not in ours or not str(port.get("device_owner") or "").startswith("compute:"):
            continue
        if port.get("binding:vif_type") in ("unbound", "binding_failed"):
            continue
        there = (node, str(port.get("mac_address") or "").lower()) in present
        if there and port.get("status") != "ACTIVE":
            up.append((port["id"], node))
        elif not there and port.get("status") == "ACTIVE":
            down.append((port["id"], node))
    return up, down


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        from keystoneauth1 import session
        from keystoneauth1.identity import v3

        self.args = args
        self.nodes = args.node
        self.session = session.Session(auth=v3.Password(
            auth_url=args.keystone_url, username="admin", password=args.password, project_name="admin",
            user_domain_id="default", project_domain_id="default"))
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.workers)
        self.sent: dict[tuple[str, str], float] = {}       # (port, "up"/"down") -> when reported
        self.running: dict[str, concurrent.futures.Future[None]] = {}
        self.rpc: subprocess.Popen[str] | None = None
        self.rpc_lock = threading.Lock()
        if args.neutron_python:
            self.rpc = subprocess.Popen(
                [args.neutron_python, str(pathlib.Path(__file__).with_name("node_agent_rpc.py")), args.neutron_conf],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert self.rpc.stdout is not None
            ready = self.rpc.stdout.readline()
            if not ready:
                raise SystemExit("node_agent_rpc.py did not start")

    def send(self, port: str, node: str, how: str) -> str | None:
        """One report; None when Neutron took it, else what went wrong."""
        if self.rpc is None:
            verb = "plug" if how == "up" else "unplug"
            done = subprocess.run([self.args.neutron_up, verb, port, node], capture_output=True, text=True,
                                  check=False)
            return None if done.returncode == 0 else f"{done.returncode}: {(done.stderr or done.stdout)[-500:]}"
        assert self.rpc.stdin is not None and self.rpc.stdout is not None
        with self.rpc_lock:
            self.rpc.stdin.write(json.dumps({"how": how, "port": port, "node": node}) + "\n")
            self.rpc.stdin.flush()
            line = self.rpc.stdout.readline()
        if not line:
            raise SystemExit("node_agent_rpc.py stopped")
        answer = json.loads(line)
        return None if answer.get("ok") else str(answer.get("error"))

    def vmis(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.args.cluster.rstrip("/") + VMIS, timeout=10) as answer:
            return list(json.load(answer).get("items") or [])

    def ports(self) -> list[dict[str, Any]]:
        query = "&".join([f"binding:host_id={n}" for n in self.nodes] + [f"fields={f}" for f in PORT_FIELDS])
        answer = self.session.get(f"/v2.0/ports?{query}", endpoint_filter={
            "service_type": "network", "interface": "public"}, raise_exc=True)
        return list(answer.json()["ports"])

    def report(self, port: str, node: str, how: str) -> None:
        verb = "plug" if how == "up" else "unplug"
        started = time.monotonic()
        try:
            error = self.send(port, node, how)
        except (OSError, SystemExit) as exc:  # the RPC process gone: said in the log, sent again later
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            LOG.warning("%s %s on %s failed: %s", verb, port, node, error.strip())
            self.sent.pop((port, how), None)
        else:
            LOG.info("%s %s on %s: %.1fs", verb, port, node, time.monotonic() - started)

    def once(self) -> None:
        up, down = decide(self.vmis(), self.ports(), self.nodes)
        now = time.monotonic()
        self.running = {p: f for p, f in self.running.items() if not f.done()}
        for how, todo in (("up", up), ("down", down)):
            for port, node in todo:
                if port in self.running or now - self.sent.get((port, how), -RETRY) < RETRY:
                    continue
                self.sent[(port, how)] = now
                self.sent.pop((port, "down" if how == "up" else "up"), None)
                self.running[port] = self.pool.submit(self.report, port, node, how)

    def run(self) -> None:
        LOG.info("playing the network agent of %s (cluster %s)", ", ".join(self.nodes), self.args.cluster)
        while True:
            try:
                self.once()
            except (OSError, urllib.error.URLError, ValueError) as exc:  # the cluster restarting, ...
                LOG.debug("look skipped: %s", exc)
            except Exception as exc:  # noqa: BLE001 keystoneauth's errors: Neutron busy or restarting
                LOG.warning("look skipped: %s", exc)
            time.sleep(self.args.interval)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="the built-in cluster's Kubernetes API URL")
    parser.add_argument("--keystone-url", required=True)
    parser.add_argument("--password-file", required=True, help="a file holding the cloud admin's password")
    parser.add_argument("--neutron-up", help="the Neutron recipe (its plug and unplug), without --neutron-python")
    parser.add_argument("--neutron-python", help="Neutron's venv Python: the reports from one process")
    parser.add_argument("--neutron-conf", help="with --neutron-python: the recipe's neutron.conf")
    parser.add_argument("--node", action="append", required=True, help="a node whose agent this plays")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=3, help="reports sent at once")
    args = parser.parse_args(argv)
    if not args.neutron_python and not args.neutron_up:
        parser.error("--neutron-up or --neutron-python (with --neutron-conf) is needed")
    with open(args.password_file) as f:
        args.password = f.read().strip()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    Agent(args).run()


if __name__ == "__main__":
    main()
