"""The resources the emulated cluster serves, with the schema each one is validated against."""

from __future__ import annotations

import dataclasses
from typing import Any

from openkeel_compute.emulator import schema

META = {"$ref": "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
STRING, INTEGER, BOOLEAN, ANY = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {}
STRING_MAP = {"type": "object", "additionalProperties": STRING}


def _object(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"apiVersion": STRING, "kind": STRING, "metadata": META, **props}}


QUANTITY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "integer", "number"]}}
TYPED_REF = {"type": "object", "required": ["kind", "name"],
             "properties": {"apiGroup": STRING, "kind": STRING, "name": STRING}}
SECRET_REF = {"type": "object", "properties": {"name": STRING, "namespace": STRING}}
# Kubernetes core/v1 PersistentVolumeSpec, with the sources a cluster serving OpenStack volumes uses (CSI, e.g.
# ceph-csi's static rbd volumes; iSCSI; NFS; hostPath and local for tests; FC).
PV_SPEC = {"type": "object", "properties": {
    "accessModes": {"type": "array", "items": STRING}, "capacity": QUANTITY_MAP,
    "claimRef": {"type": "object", "properties": {k: STRING for k in (
        "apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")}},
    "mountOptions": {"type": "array", "items": STRING},
    "nodeAffinity": {"type": "object", "properties": {"required": {"$ref": "k8s.io.api.core.v1.NodeSelector"}}},
    "persistentVolumeReclaimPolicy": STRING, "storageClassName": STRING, "volumeMode": STRING,
    "volumeAttributesClassName": STRING,
    "csi": {"type": "object", "properties": {
        "driver": STRING, "volumeHandle": STRING, "readOnly": BOOLEAN, "fsType": STRING,
        "volumeAttributes": STRING_MAP, "controllerPublishSecretRef": SECRET_REF, "nodeStageSecretRef": SECRET_REF,
        "nodePublishSecretRef": SECRET_REF, "controllerExpandSecretRef": SECRET_REF,
        "nodeExpandSecretRef": SECRET_REF}},
    "iscsi": {"type": "object", "properties": {
        "targetPortal": STRING, "iqn": STRING, "lun": INTEGER, "iscsiInterface": STRING, "fsType": STRING,
        "readOnly": BOOLEAN, "portals": {"type": "array", "items": STRING}, "chapAuthDiscovery": BOOLEAN,
        "chapAuthSession": BOOLEAN, "secretRef": SECRET_REF, "initiatorName": STRING}},
    "nfs": {"type": "object", "properties": {"server": STRING, "path": STRING, "readOnly": BOOLEAN}},
    "hostPath": {"type": "object", "properties": {"path": STRING, "type": STRING}},
    "local": {"type": "object", "properties": {"path": STRING, "fsType": STRING}},
    "fc": {"type": "object", "properties": {"targetWWNs": {"type": "array", "items": STRING}, "lun": INTEGER,
                                            "fsType": STRING, "readOnly": BOOLEAN,
                                            "wwids": {"type": "array", "items": STRING}}},
}}

# Kinds KubeVirt's document does not describe: the core fields of Kubernetes' own types.
CORE_NODES = {
    "Namespace": _object(spec={"type": "object", "properties": {"finalizers": {"type": "array", "items": STRING}}},
                         status=ANY),
    "Secret": _object(data=STRING_MAP, stringData=STRING_MAP, type=STRING, immutable=BOOLEAN),
    "Lease": _object(spec={"type": "object", "properties": {
        "holderIdentity": STRING, "leaseDurationSeconds": INTEGER, "acquireTime": STRING, "renewTime": STRING,
        "leaseTransitions": INTEGER, "strategy": STRING, "preferredHolder": STRING}}),
    "ControllerRevision": _object(data=ANY, revision=INTEGER),
    "DataVolume": _object(spec={"$ref": "v1beta1.DataVolumeSpec"}, status=ANY),
    "Node": _object(spec=ANY, status=ANY),
    "Pod": _object(spec=ANY, status=ANY),
    # Multus's CRD (k8s.cni.cncf.io/v1): spec.config is the CNI configuration, a JSON string
    "NetworkAttachmentDefinition": _object(spec={"type": "object", "properties": {"config": STRING}}),
    "PersistentVolumeClaim": _object(spec={"$ref": "k8s.io.api.core.v1.PersistentVolumeClaimSpec"}, status=ANY),
    "PersistentVolume": _object(spec=PV_SPEC, status=ANY),
    # KubeVirt's snapshot.kubevirt.io/v1beta1 and export.kubevirt.io/v1 (types.go of each API group)
    "VirtualMachineSnapshot": _object(spec={"type": "object", "required": ["source"], "properties": {
        "source": TYPED_REF, "deletionPolicy": STRING, "failureDeadline": STRING}}, status=ANY),
    "VirtualMachineSnapshotContent": _object(spec={"type": "object", "properties": {
        "source": ANY, "virtualMachineSnapshotName": STRING, "volumeBackups": {"type": "array", "items": ANY}}},
        status=ANY),
    "VirtualMachineExport": _object(spec={"type": "object", "required": ["source"], "properties": {
        "source": TYPED_REF, "tokenSecretRef": STRING, "ttlDuration": STRING}}, status=ANY),
}


@dataclasses.dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    # what discovery lists, so that `kubectl get vm,vmi,dv` and `kubectl get all` resolve as on a real cluster
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    singular: str = ""  # discovery's singularName (default: the kind in lower case)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``virtualmachines.kubevirt.io`` as the API server names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def problems(self, obj: dict[str, Any]) -> schema.Problems:
        definition = schema.definition_of(self.kind)
        if definition is not None:
            return schema.validate(obj, definition)
        return schema.validate_node(obj, CORE_NODES[self.kind])


IT = "instancetype.kubevirt.io"
ALL = ("all",)
# Short names and categories: Kubernetes' own discovery for the core kinds; KubeVirt's CRDs
# (virt-operator's crds.go) and CDI's (DataVolume's kubebuilder markers) for theirs.
RESOURCES = [
    Resource("", "v1", "namespaces", "Namespace", False, short_names=("ns",)),
    Resource("", "v1", "nodes", "Node", False, True, short_names=("no",)),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "pods", "Pod", True, True, short_names=("po",), categories=ALL),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, True, short_names=("pvc",)),
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False, True, short_names=("pv",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    Resource("kubevirt.io", "v1", "virtualmachines", "VirtualMachine", True, True, ("vm", "vms"), ALL),
    Resource("kubevirt.io", "v1", "virtualmachineinstances", "VirtualMachineInstance", True, True, ("vmi", "vmis"),
             ALL),
    Resource(IT, "v1beta1", "virtualmachineinstancetypes", "VirtualMachineInstancetype", True,
             short_names=("vminstancetype", "vminstancetypes", "vmf", "vmfs"), categories=ALL),
    Resource(IT, "v1beta1", "virtualmachineclusterinstancetypes", "VirtualMachineClusterInstancetype", False,
             short_names=("vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs")),
    Resource(IT, "v1beta1", "virtualmachinepreferences", "VirtualMachinePreference", True,
             short_names=("vmpref", "vmprefs", "vmp", "vmps"), categories=ALL),
    Resource(IT, "v1beta1", "virtualmachineclusterpreferences", "VirtualMachineClusterPreference", False,
             short_names=("vmcp", "vmcps")),
    Resource("cdi.kubevirt.io", "v1beta1", "datavolumes", "DataVolume", True, True, ("dv", "dvs"), ALL),
    Resource("kubevirt.io", "v1", "virtualmachineinstancemigrations", "VirtualMachineInstanceMigration", True, True,
             ("vmim", "vmims"), ALL),
    Resource("migrations.kubevirt.io", "v1alpha1", "migrationpolicies", "MigrationPolicy", False, True),
    Resource("snapshot.kubevirt.io", "v1beta1", "virtualmachinesnapshots", "VirtualMachineSnapshot", True, True,
             ("vmsnapshot", "vmsnapshots"), ALL),
    Resource("snapshot.kubevirt.io", "v1beta1", "virtualmachinesnapshotcontents", "VirtualMachineSnapshotContent",
             True, True, ("vmsnapshotcontent", "vmsnapshotcontents"), ALL),
    Resource("export.kubevirt.io", "v1", "virtualmachineexports", "VirtualMachineExport", True, True,
             ("vmexport", "vmexports"), ALL),
    Resource("k8s.cni.cncf.io", "v1", "network-attachment-definitions", "NetworkAttachmentDefinition", True,
             short_names=("net-attach-def",), singular="network-attachment-definition"),
]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND = {r.kind: r for r in RESOURCES}
