"""Cinder volumes as Kubernetes storage and VM disks (issue 30.3): pure, no cluster access.

Each attachment's ``connection_info`` (what Cinder answers once the attachment has the node's
connector) becomes a static PersistentVolume (reclaim policy ``Retain``: the data is Cinder's, never
the cluster's) pre-bound to a claim in the server's namespace, and the claim names the volume
(``spec.volumeName``), so that nothing else can bind either of them:

- ``nfs``: an NFS volume on the export (``server:path``), Filesystem mode, ReadWriteMany;
- ``iscsi``: an iSCSI volume (portal, IQN, LUN), Block mode, ReadWriteOnce;
- ``rbd``: Ceph's CSI driver with a static volume (``staticVolume: "true"``, the pool and image),
  Block mode, ReadWriteOnce;
- any other type is refused (``VolumeRefused``) with a message that names it.

The VM gets one disk per volume whose serial is the volume id (what a guest's /dev/disk/by-id shows,
as Nova's libvirt driver sets it): the boot volume replaces the root disk (no image import), the
others follow, on the bus asked for when KubeVirt has it (virtio otherwise), hotpluggable when KubeVirt
hotplugs that bus (``hotplug_disk``: a volume attached to a running server is added the same way, and any
of them can be detached from it).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from openkeel_compute.kubevirt.mapping import ROOT_DISK

CLAIM_PREFIX = "vol-"
PV_PREFIX = "openkeel-"
KUBEVIRT_BUSES = ("virtio", "sata", "scsi", "usb")
#: the buses KubeVirt hotplugs a disk on
HOTPLUG_BUSES = ("virtio", "scsi")
#: the label a volume's objects carry beside the server's
VOLUME_LABEL = "openkeel.io/volume-id"


class VolumeRefused(ValueError):
    """What cannot be given to a KubeVirt VM (a Cinder volume type without a Kubernetes source)."""


def claim_name(volume_id: str) -> str:
    return CLAIM_PREFIX + volume_id


def pv_name(attachment_id: str) -> str:
    return PV_PREFIX + attachment_id


def _source(info: Mapping[str, Any]) -> tuple[dict[str, Any], str, list[str]]:
    """(the PersistentVolume's source, its volume mode, its access modes) of ``connection_info``."""
    kind = str(info.get("driver_volume_type") or "")
    data = info.get("data") or {}
    read_only = data.get("access_mode") == "ro"
    if kind == "nfs":
        export = str(data.get("export") or "")
        server, _, path = export.partition(":")
        if not server or not path:
            raise VolumeRefused(f"Cinder's NFS export {export!r} is not server:path")
        return {"nfs": {"server": server, "path": path, "readOnly": read_only}}, "Filesystem", ["ReadWriteMany"]
    if kind == "iscsi":
        portal, iqn = data.get("target_portal"), data.get("target_iqn")
        if not portal or not iqn:
            raise VolumeRefused("Cinder's iSCSI connection has no target portal or IQN")
        source: dict[str, Any] = {"targetPortal": str(portal), "iqn": str(iqn), "lun": int(data.get("target_lun") or 0),
                                  "readOnly": read_only}
        if data.get("target_portals"):
            source["portals"] = [str(p) for p in data["target_portals"] if p != portal]
        return {"iscsi": source}, "Block", ["ReadWriteOnce"]
    if kind == "rbd":
        name = str(data.get("name") or "")
        pool, _, image = name.partition("/")
        if not pool or not image:
            raise VolumeRefused(f"Cinder's RBD volume name {name!r} is not pool/image")
        attributes = {"clusterID": str(data.get("cluster_name") or "ceph"), "pool": pool, "staticVolume": "true",
                      "imageFeatures": "layering"}
        return {"csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": image, "volumeAttributes": attributes,
                        "readOnly": read_only}}, "Block", ["ReadWriteOnce"]
    raise VolumeRefused(f"Cinder volumes of type {kind or 'unknown'} cannot be given to a KubeVirt virtual machine "
                        "(nfs, iscsi and rbd can)")


def storage_objects(namespace: str, labels: Mapping[str, str], volume_id: str, attachment_id: str, size_gib: int,
                    connection_info: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the PersistentVolume, the claim) of one attachment, bound to each other by name."""
    source, mode, access = _source(connection_info)
    claim, volume = claim_name(volume_id), pv_name(attachment_id)
    own = {**labels, VOLUME_LABEL: volume_id}
    size = f"{max(int(size_gib or 1), 1)}Gi"
    pv = {"apiVersion": "v1", "kind": "PersistentVolume",
          "metadata": {"name": volume, "labels": dict(own)},
          "spec": {"capacity": {"storage": size}, "accessModes": list(access), "volumeMode": mode,
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                   "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                                "name": claim},
                   **source}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": claim, "namespace": namespace, "labels": dict(own)},
           "spec": {"accessModes": list(access), "volumeMode": mode, "storageClassName": "", "volumeName": volume,
                    "resources": {"requests": {"storage": size}}}}
    return pv, pvc


def with_volumes(vm: dict[str, Any], volumes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of ``vm`` with the server's volumes as disks (``volumes``: block device rows with
    volume_id, boot_index, disk_bus). The boot volume replaces the root disk and its import."""
    vm = copy.deepcopy(vm)
    spec = vm["spec"]
    tspec = spec["template"]["spec"]
    devices = tspec["domain"]["devices"]
    disks, sources = devices.setdefault("disks", []), tspec.setdefault("volumes", [])
    for bdm in volumes:
        volume_id = str(bdm["volume_id"])
        claim = {"persistentVolumeClaim": {"claimName": claim_name(volume_id)}}
        if bdm.get("boot_index") == 0:
            spec.pop("dataVolumeTemplates", None)
            for source in sources:
                if source["name"] == ROOT_DISK:
                    source.pop("dataVolume", None)
                    source.update(claim)
            for disk in disks:
                if disk["name"] == ROOT_DISK:
                    disk["serial"] = volume_id
            continue
        volume, disk = hotplug_disk(bdm)
        disks.append(disk)
        sources.append(volume)
    return vm


def hotplug_disk(bdm: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the VM's volume, its disk) of a volume that is not the root disk: on its claim, serial = the volume
    id, hotpluggable when its bus is one KubeVirt hotplugs (virtio, scsi), so that it can be detached
    from a running server as Nova detaches it (a volume attached later is hotplugged the same way)."""
    volume_id = str(bdm["volume_id"])
    bus = bdm.get("disk_bus") if bdm.get("disk_bus") in KUBEVIRT_BUSES else "virtio"
    name = claim_name(volume_id)
    source: dict[str, Any] = {"claimName": name}
    if bus in HOTPLUG_BUSES:
        source["hotpluggable"] = True
    return {"name": name, "persistentVolumeClaim": source}, {"name": name, "serial": volume_id, "disk": {"bus": bus}}
