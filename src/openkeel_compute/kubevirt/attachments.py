"""A Neutron network as a Multus NetworkAttachmentDefinition, and a Neutron port as a VM interface.

Each Neutron network a server's ports are on becomes one NetworkAttachmentDefinition in the server's
namespace, named ``neutron-<network id>`` and labelled with the network; each port an interface of the
VirtualMachine (bridge binding, the port's MAC address) on that network, named ``port-<port id>``.

The NetworkAttachmentDefinition's CNI configuration is the operator's choice (``[controller]
network_attachment_config``, a template); the default is shaped for OVN-Kubernetes secondary networks:
``localnet`` (the provider's physical network, its VLAN) for flat and VLAN provider networks, ``layer2``
otherwise, with Neutron's MTU and no ``subnets`` (pure L2: Neutron owns the addresses, the guest gets
them from its network data).
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from typing import Any

from openkeel_compute.kubevirt.mapping import MANAGED_BY, MANAGER

NAD_API = "k8s.cni.cncf.io/v1"
NAD_KIND = "NetworkAttachmentDefinition"
#: the label naming the Neutron network a NetworkAttachmentDefinition carries
NETWORK_LABEL = "openkeel.io/neutron-network"
#: the placeholders a template may use (string.Template: ``$name`` or ``${name}``)
PLACEHOLDERS = ("name", "namespace", "network_id", "network_name", "network_type", "physical_network",
                "segmentation_id", "mtu", "topology")
_LOCALNET_TYPES = ("flat", "vlan")


def attachment_name(network_id: str) -> str:
    """The NetworkAttachmentDefinition of a Neutron network (in the server's namespace)."""
    return f"neutron-{network_id}"


def port_interface_name(port_id: str) -> str:
    """The VM interface (and its network) of a Neutron port."""
    return f"port-{port_id}"


def _values(namespace: str, network: Mapping[str, Any]) -> dict[str, str]:
    network_type = str(network.get("provider:network_type") or "")
    segment = network.get("provider:segmentation_id")
    return {"name": attachment_name(str(network["id"])), "namespace": namespace, "network_id": str(network["id"]),
            "network_name": str(network.get("name") or ""), "network_type": network_type,
            "physical_network": str(network.get("provider:physical_network") or ""),
            "segmentation_id": str(segment if segment is not None else 0),
            "mtu": str(int(network.get("mtu") or 1500)),
            "topology": "localnet" if network_type in _LOCALNET_TYPES else "layer2"}


def default_config(namespace: str, network: Mapping[str, Any]) -> dict[str, Any]:
    """OVN-Kubernetes' secondary network for a Neutron network."""
    values = _values(namespace, network)
    config: dict[str, Any] = {"cniVersion": "0.3.1", "name": values["name"], "type": "ovn-k8s-cni-overlay",
                              "topology": values["topology"], "netAttachDefName": f"{namespace}/{values['name']}",
                              "mtu": int(values["mtu"])}
    if values["topology"] == "localnet":
        if values["physical_network"]:
            config["physicalNetworkName"] = values["physical_network"]
        if values["network_type"] == "vlan" and network.get("provider:segmentation_id") is not None:
            config["vlanID"] = int(network["provider:segmentation_id"])
    return config


def render_config(template: str, namespace: str, network: Mapping[str, Any]) -> dict[str, Any]:
    """The operator's template with the network's values; ValueError when it is not a JSON object then."""
    text = string.Template(template).substitute(_values(namespace, network))
    config = json.loads(text)
    if not isinstance(config, dict):
        raise ValueError("[controller] network_attachment_config must make a JSON object")  # noqa: TRY004
    return config


def attachment(namespace: str, network: Mapping[str, Any], template: str = "") -> dict[str, Any]:
    """The NetworkAttachmentDefinition of ``network`` (Neutron's network body, as an administrator sees it:
    ``provider:*`` and ``mtu``) in ``namespace``."""
    config = render_config(template, namespace, network) if template else default_config(namespace, network)
    return {"apiVersion": NAD_API, "kind": NAD_KIND,
            "metadata": {"name": attachment_name(str(network["id"])), "namespace": namespace,
                         "labels": {MANAGED_BY: MANAGER, NETWORK_LABEL: str(network["id"])}},
            "spec": {"config": json.dumps(config, sort_keys=True, separators=(",", ":"))}}
