"""/os-baremetal-nodes (up to 2.35): Nova's proxy to Ironic, answered as Nova answers without one.

A KubeVirt cloud has no Ironic. Creating, deleting and the interface actions are refused by Nova's
handlers themselves, for anyone, with "Command not supported. Please use Ironic command …" (400).
Listing and showing nodes are an administrator's (os_compute_api:os-baremetal-nodes:list/show);
Nova 34.0.0 then asks Ironic and, with none configured, fails with a 500 naming keystoneauth's
exception. OpenKeel answers what Nova's own contract for these handlers declares, and what Nova
answered before it proxied through openstacksdk when Ironic's client was absent: 501, "The requested
functionality is not supported." (docs/api.md). Nova's schemas for these handlers are empty: any
body and any query string are taken.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.wsgi import operation
from openkeel_compute.policies import contract as rules

NOT_SUPPORTED = "The requested functionality is not supported."
VERSIONS = "-2.35"  # Nova's MAX_PROXY_API_SUPPORT_VERSION


def _use_ironic(command: str):
    raise faults.BadRequest(f"Command not supported. Please use Ironic command {command} to perform this action.")


@operation(versions=VERSIONS, expected=(404, 501), without="Ironic")
def index(req):
    common.can(req, rules.BAREMETAL % "list", {})
    raise faults.Fault(NOT_SUPPORTED, 501)


@operation(versions=VERSIONS, expected=(404, 501), without="Ironic")
def show(req, node_id):
    common.can(req, rules.BAREMETAL % "show", {})
    raise faults.Fault(NOT_SUPPORTED, 501)


@operation(versions=VERSIONS, expected=(400,), without="Ironic")
def create(req):
    _use_ironic("node-create")


@operation(versions=VERSIONS, expected=(400,), without="Ironic")
def delete(req, node_id):
    _use_ironic("node-delete")


@operation(versions=VERSIONS, expected=(400,), without="Ironic")
def add_interface(req, node_id):
    _use_ironic("port-create")


@operation(versions=VERSIONS, expected=(400,), without="Ironic")
def remove_interface(req, node_id):
    _use_ironic("port-delete")
