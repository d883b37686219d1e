"""The Multus networks of a server's Neutron networks: one NetworkAttachmentDefinition per Neutron
network in the server's namespace (kubevirt/attachments.py), made before the VM that names it, and
collected once no VirtualMachine or VMI of the namespace names it any more (a server's delete, seen
complete by the observation)."""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps.base import Context
from openkeel_compute.kubevirt.attachments import NAD_KIND, attachment

LOG = logging.getLogger(__name__)


def ensure(ctx: Context, namespace: str, networks: list[dict[str, Any]]) -> None:
    """Each network's NetworkAttachmentDefinition in ``namespace`` (server-side apply: the same config
    again changes nothing; a new template or MTU reaches it)."""
    for network in networks:
        ctx.cluster.apply(attachment(namespace, network, ctx.settings.network_attachment_config))


def collect(ctx: Context, namespace: str) -> None:
    """Delete the namespace's NetworkAttachmentDefinitions no VirtualMachine or VMI names."""
    ours = ctx.cluster.attachments(namespace)
    if not ours:
        return
    used = ctx.cluster.multus_networks(namespace)
    for nad in ours:
        name = nad["metadata"]["name"]
        if name not in used:
            LOG.info("NetworkAttachmentDefinition %s/%s: no server uses it now, deleted", namespace, name)
            ctx.cluster.delete(ObjectKey(NAD_KIND, namespace, name))
