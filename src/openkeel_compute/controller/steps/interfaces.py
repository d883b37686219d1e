"""attach-interface and detach-interface: a Neutron port plugged into a server's VM or taken out of it, as
Nova's compute ``attach_interface`` / ``detach_interface`` do it, carried out by KubeVirt's declarative
interface hotplug.

Attach (the API made or took the port, gave it the server's ``device_id`` and recorded the interface):

1. the port bound to the server's node as the build binds it (steps/ports.py: ``device_owner``
   ``compute:<zone>``, ``binding:host_id``, ``dns_name``), kept in the server's network info (its addresses);
2. its network's NetworkAttachmentDefinition in the server's namespace (steps/attachments.py);
3. the VM template's ``interfaces`` and ``networks`` gain the port's interface (bridge binding, the port's
   MAC) on that Multus network, the cloud-init Secret's network data rewritten with it (what the guest's
   hotplug handler reads to configure the new interface): KubeVirt appends it to the running VMI and plugs it into the guest (a
   stopped VM gets it at its next start);
4. a running server waits for Neutron's network-vif-plugged of the port as the build does (steps/vif_wait.py,
   ``vif_plugging_timeout`` / ``vif_plugging_is_fatal``; Nova's libvirt driver does not wait here, which
   KubeVirt's asynchronous hotplug makes worth it: the event ends once the guest has the interface).

Whatever cannot be done (Neutron fails the binding, no plug event with plugging fatal, the attempts spent)
ends as Nova's compute ends a failed attach: the interface taken out again, the port given back (deleted
when OpenKeel made it, unbound otherwise), the instance fault ``InterfaceAttachFailed`` and the event
``compute_attach_interface`` in "Error" (``instance.interface_attach.error``); the server keeps its state.

Detach: a port the server does not have ends the event in "Error" ("Port … is not attached"), as Nova's
compute raises. Otherwise its interface gets ``state: absent`` (KubeVirt unplugs it from the guest, then
drops it from the VMI and the VM); once the running VMI no longer has it (or ``vif_plugging_timeout``
passed: Nova's detach gives up on a guest that does not let go, ``InterfaceDetachFailed``), the port is
deleted when OpenKeel made it, else unbound and kept, as Nova's ``deallocate_port_for_instance``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from openkeel_compute.compute import network_requests
from openkeel_compute.compute.instances import instance_actions, instance_faults, instance_sysmeta
from openkeel_compute.controller.steps import attachments, net_events, ports, vif_wait
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow, Waiting
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.attachments import attachment_name, port_interface_name
from openkeel_compute.kubevirt.names import server_user_data_secret, server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, sysmeta

LOG = logging.getLogger(__name__)
_INTERFACES = "/spec/template/spec/domain/devices/interfaces"
_NETWORKS = "/spec/template/spec/networks"
POLL = 0.5


def _template(vm: dict[str, Any]) -> dict[str, Any]:
    return ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}


def _vm_lists(vm: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    spec = _template(vm)
    return list(((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []), \
        list(spec.get("networks") or [])


def _start(ctx: Context, row: ServerRow, server: dict[str, Any], event: str) -> None:
    """The operation's compute event, started once per outbox row (kept in ``INTERFACE_EVENT``)."""
    current = server["system_metadata"].get(sysmeta.INTERFACE_EVENT) or ""
    if current.split(":", 1)[0] == str(row.id):
        return
    with transaction(ctx.engine) as conn:
        if current:  # an earlier row's, never finished (its server's delete overrode it)
            instance_actions.finish_event(conn, int(current.split(":", 1)[1]), "Error")
        action_id = instance_actions.action_for_request(conn, server["uuid"], row.request_id)
        value = None
        if action_id is not None:
            value = f"{row.id}:{instance_actions.start_event(conn, action_id, event, host=server.get('host'))}"
        instance_sysmeta.set_system_metadata_item(conn, server["uuid"], sysmeta.INTERFACE_EVENT, value)
    server["system_metadata"][sysmeta.INTERFACE_EVENT] = value


def _finish(ctx: Context, server: dict[str, Any], fault: Fault | None) -> None:
    """The operation's event finished (with the fault recorded when there is one)."""
    with transaction(ctx.engine) as conn:
        if fault is not None:
            instance_faults.add_fault(conn, server["uuid"], code=fault.code, message=fault.message,
                                      details=fault.details, host=server.get("host"))
        current = instance_sysmeta.system_metadata_item(conn, server["uuid"], sysmeta.INTERFACE_EVENT)
        if current:
            event_id = int(current.split(":", 1)[1])
            if fault is None:
                instance_actions.finish_event(conn, event_id, "Success", host=server.get("host"))
            else:
                instance_actions.finish_event(conn, event_id, "Error", traceback=fault.details or fault.message,
                                              details=fault.message, host=server.get("host"))
            instance_sysmeta.set_system_metadata_item(conn, server["uuid"], sysmeta.INTERFACE_EVENT, None)
    server["system_metadata"].pop(sysmeta.INTERFACE_EVENT, None)


def _running(ctx: Context, server: dict[str, Any]) -> dict[str, Any] | None:
    """The server's running VMI (None: stopped, or not started)."""
    vmi = ctx.cluster.look(ctx.namespace_of(server), server["uuid"])[1]
    return vmi if vmi is not None and (vmi.get("status") or {}).get("phase") == "Running" else None


def plug(ctx: Context, server: dict[str, Any], vif: dict[str, Any]) -> None:
    """The port's interface and Multus network appended to the VM's template (KubeVirt's hotplug)."""
    namespace = ctx.namespace_of(server)
    vm = ctx.cluster.look(namespace, server["uuid"])[0]
    if vm is None:
        return
    name = port_interface_name(vif["port_id"])
    interfaces, networks = _vm_lists(vm)
    if any(i.get("name") == name and i.get("state") != "absent" for i in interfaces):
        return  # plugged by an earlier attempt
    wanted_ifaces = [i for i in interfaces if i.get("name") != name] + [
        {"name": name, "bridge": {}, "macAddress": vif["mac"]}]
    wanted_nets = [n for n in networks if n.get("name") != name] + [
        {"name": name, "multus": {"networkName": attachment_name(vif["network_id"])}}]
    ctx.cluster.patch("VirtualMachine", namespace, server_vm_name(server["uuid"]), [
        {"op": "test", "path": _INTERFACES, "value": interfaces}, {"op": "replace", "path": _INTERFACES, "value": wanted_ifaces},
        {"op": "test", "path": _NETWORKS, "value": networks}, {"op": "replace", "path": _NETWORKS, "value": wanted_nets}])


def refresh_network_data(ctx: Context, server: dict[str, Any]) -> None:
    """The cloud-init Secret again with the ports as they are now (its network data: kubevirt/netdata.py),
    which the guest's hotplug handler reads when an interface comes."""
    name = server_user_data_secret(server["uuid"])
    try:
        secrets = ctx.objects(server).secrets
    except ValueError as exc:  # the server's objects cannot be composed now: the guest keeps its data
        LOG.warning("server %s: its network data not rewritten: %s", server["uuid"], exc)
        return
    for secret in secrets:
        if secret["metadata"]["name"] == name:
            ctx.cluster.apply(secret)


def _request(ctx: Context, uuid: str, port_id: str) -> dict[str, Any] | None:
    with reader(ctx.engine) as conn:
        return next((r for r in network_requests.of(conn, uuid) if r["port_id"] == port_id), None)


def _let_go(ctx: Context, server: dict[str, Any], port_id: str, created: bool) -> None:
    """The port given back to Neutron, then out of the server's network info and interfaces (Neutron away:
    raised before anything is forgotten, so that the next attempt finds the port again)."""
    ports.let_go(ctx, server["uuid"], port_id, created)
    info = [vif for vif in ports.info_of(server) or [] if vif["port_id"] != port_id]
    ports.save(ctx, server, info)
    with transaction(ctx.engine) as conn:
        network_requests.forget(conn, server["uuid"], port_id)
    refresh_network_data(ctx, server)


def attach(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    port_id = str(row.payload["port_id"])
    _start(ctx, row, server, events.ATTACH_INTERFACE)
    if ctx.network is None:  # this controller has no [neutron]: nothing to bind the port with
        fault = Fault(500, f"Failed to attach network adapter device to {server['uuid']}",
                      "the controller has no [neutron] configuration")
        _finish(ctx, server, fault)
        return Failed(fault.message, fault)
    request = _request(ctx, server["uuid"], port_id)
    if request is None:  # detached (or the server deleted) meanwhile
        _finish(ctx, server, None)
        return DONE
    if server["system_metadata"].get(sysmeta.VIF_WAIT):
        outcome = vif_wait.check(ctx, row, server, give_up, {port_id})
        if outcome is DONE:
            _finish(ctx, server, None)
        return outcome
    if server["system_metadata"].get(sysmeta.REQUESTED_NETWORKS) not in ("auto", "requested"):
        with transaction(ctx.engine) as conn:  # booted with networks "none": its interfaces are ports now
            instance_sysmeta.set_system_metadata_item(conn, server["uuid"], sysmeta.REQUESTED_NETWORKS, "requested")
    info = ports.info_of(server) or []
    vif = next((v for v in info if v["port_id"] == port_id), None)
    if vif is None:
        calls = ctx.network.admin()
        try:
            vif = ports.bind(ctx, server, calls, port_id, bool(request["port_created"]), request["tag"],
                             ports.dns_integration(calls), {})
        except ports.AllocationFailed as exc:
            LOG.warning("server %s: port %s cannot be attached: %s", server["uuid"], port_id, exc)
            return give_up(ctx, row, server, str(exc))
        info.append(vif)
        ports.save(ctx, server, info)
        refresh_network_data(ctx, server)
    attachments.ensure(ctx, ctx.namespace_of(server), ports.networks_of(ctx, [vif]))
    plug(ctx, server, vif)
    if not vif.get("active") and _running(ctx, server) is not None:
        outcome = vif_wait.begin(ctx, server, [vif])
        if outcome is not DONE:
            return outcome
    _finish(ctx, server, None)
    return DONE


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """End the attach as Nova's compute ends a failed one: the interface out, the port given back, the
    fault ``InterfaceAttachFailed``, the event in "Error"; the server keeps its state."""
    uuid = server["uuid"]
    port_id = str(row.payload["port_id"])
    fault = Fault(500, f"Failed to attach network adapter device to {uuid}", reason)
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.VIF_WAIT, None)
    server["system_metadata"].pop(sysmeta.VIF_WAIT, None)
    request = _request(ctx, uuid, port_id)
    try:
        net_events.unplug(ctx, server, port_id)
        _let_go(ctx, server, port_id, bool(request and request["port_created"]))
    except Exception as exc:  # noqa: BLE001 - the server's delete lets it go then
        LOG.warning("server %s: the port %s of a failed attach not given back yet: %s", uuid, port_id, exc)
    _finish(ctx, server, fault)
    return Failed(fault.message, fault)


def detach(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid = server["uuid"]
    port_id = str(row.payload["port_id"])
    _start(ctx, row, server, events.DETACH_INTERFACE)
    vif = next((v for v in ports.info_of(server) or [] if v["port_id"] == port_id), None)
    if vif is None or ctx.network is None:
        fault = Fault(404, f"Port {port_id} is not attached", f"PortNotFound: Port {port_id} is not attached\n")
        _finish(ctx, server, fault)
        return Failed(fault.message, fault)
    net_events.unplug(ctx, server, port_id)
    vmi = _running(ctx, server)
    name = port_interface_name(port_id)
    if vmi is not None and any(i.get("name") == name for i in _vm_lists({"spec": {"template": vmi}})[0]):
        until = server["system_metadata"].get(sysmeta.DETACH_WAIT)
        now = ctx.now()
        if not until:
            until = (now + dt.timedelta(seconds=max(ctx.settings.vif_plugging_timeout, 30))).isoformat()
            with transaction(ctx.engine) as conn:
                instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.DETACH_WAIT, until)
        deadline = dt.datetime.fromisoformat(until)
        if now.tzinfo is None and deadline.tzinfo is not None:
            deadline = deadline.replace(tzinfo=None)
        if now < deadline:
            return Waiting("waiting for KubeVirt to unplug the interface", POLL)
        fault = Fault(400, f"Failed to detach network adapter device from {uuid}",
                      f"InterfaceDetachFailed: the guest still has interface {name}\n")
        with transaction(ctx.engine) as conn:
            instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.DETACH_WAIT, None)
        _finish(ctx, server, fault)
        return Failed(fault.message, fault)
    request = _request(ctx, uuid, port_id)
    _let_go(ctx, server, port_id, bool(request["port_created"]) if request else bool(vif.get("created")))
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.DETACH_WAIT, None)
    _finish(ctx, server, None)
    return DONE
