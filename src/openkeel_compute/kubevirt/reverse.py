"""KubeVirt objects -> Nova flavors.

Two directions back:

* ``objects_to_flavor``: the exact round trip of what ``flavor_to_kubevirt`` produced, read from the
  instancetype(s) and their annotations (id, name, description, sizes, access, every extra spec).
* ``import_instancetype``: any instancetype (common-instancetypes, Cozystack...) and optionally its
  preference, as a flavor whose extra specs reproduce them; what no extra spec can express is listed
  in ``lost`` by JSON path, so rendering the flavor again gives the object minus exactly those paths.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from openkeel_compute.kubevirt.flavor import (
    DISABLED,
    EPHEMERAL,
    IS_PUBLIC,
    FlavorCheck,
    InvalidFlavor,
    check_extra_specs,
)
from openkeel_compute.kubevirt.mapping import (
    ANN_DESCRIPTION,
    ANN_DISABLED,
    ANN_DISK,
    ANN_EPHEMERAL,
    ANN_EXTRA_SPECS,
    ANN_ID,
    ANN_LEFT_OUT,
    ANN_NAME,
    ANN_PROJECT,
    ANN_RXTX,
    ANN_SWAP,
    CLUSTER_INSTANCETYPE,
    INSTANCETYPE,
    flavor_to_kubevirt,
)
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions
from openkeel_compute.kubevirt.quantity import MIB, to_bytes

_PAGE_SPEC = {"2Mi": "2MB", "1Gi": "1GB"}
_MODEL_OF = {"sev": "amd-sev", "snp": "amd-sev-snp", "tdx": "intel-tdx"}
KUBEVIRT_DESCRIPTION = "instancetype.kubevirt.io/description"
_DESCRIPTION_MAX = 65535  # Nova's limit


class NotAnInstancetype(ValueError):
    """The object is not an instancetype OpenKeel can read."""


@dataclasses.dataclass(frozen=True, slots=True)
class ImportResult:
    """A flavor built from an instancetype (and preference), with what it could not express."""

    flavor: dict[str, Any]
    lost: tuple[tuple[str, str], ...]  # (JSON path in the source object, why)


def _kind_is_cluster(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    if kind == CLUSTER_INSTANCETYPE:
        return True
    if kind == INSTANCETYPE:
        return False
    raise NotAnInstancetype(f"kind {kind!r} is not an instancetype")


class IncompleteObjects(NotAnInstancetype):
    """OpenKeel objects that left the description or the extra specs out (Kubernetes' annotation limit)."""


def _mib(quantity: Any) -> float:
    return float(to_bytes(quantity) / MIB)


def objects_to_flavor(instancetypes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The flavor that produced these OpenKeel instancetypes (one cluster object or the namespaced copies)."""
    if not instancetypes:
        raise NotAnInstancetype("no instancetype given")
    first = instancetypes[0]
    annotations = first.get("metadata", {}).get("annotations", {})
    if ANN_ID not in annotations:
        raise NotAnInstancetype("not made by OpenKeel: no openkeel.io/flavor-id annotation")
    is_public = _kind_is_cluster(first)
    access: list[str] = []
    for obj in instancetypes:
        obj_annotations = obj.get("metadata", {}).get("annotations", {})
        if obj_annotations.get(ANN_ID) != annotations[ANN_ID] or _kind_is_cluster(obj) != is_public:
            raise NotAnInstancetype("the objects belong to different flavors")
        if not is_public:
            access.append(obj_annotations[ANN_PROJECT])
    left_out = annotations.get(ANN_LEFT_OUT) or ("" if ANN_EXTRA_SPECS in annotations else "extra_specs")
    if left_out:
        raise IncompleteObjects(
            f"flavor {annotations[ANN_ID]}: its {left_out.replace(',', ' and ')} did not fit in its objects "
            "(Kubernetes refuses more than 262144 bytes of annotations per object); the flavor API has them: "
            "read this flavor there")
    spec = first["spec"]
    swap_text = annotations[ANN_SWAP]
    flavor: dict[str, Any] = {
        "id": annotations[ANN_ID],
        "name": annotations[ANN_NAME],
        "description": annotations.get(ANN_DESCRIPTION),
        "ram": int(_mib(spec["memory"]["guest"])),
        "disk": int(annotations[ANN_DISK]),
        "vcpus": spec["cpu"]["guest"],
        "swap": int(swap_text) if swap_text else "",
        EPHEMERAL: int(annotations[ANN_EPHEMERAL]),
        DISABLED: annotations[ANN_DISABLED] == "true",
        IS_PUBLIC: is_public,
        "rxtx_factor": float(annotations[ANN_RXTX]),
        "extra_specs": json.loads(annotations[ANN_EXTRA_SPECS]),
    }
    if not is_public:
        flavor["access"] = access
    return flavor


class _Importer:
    def __init__(self, obj: Mapping[str, Any], options: MappingOptions) -> None:
        self.obj = obj
        self.options = options
        self.specs: dict[str, str] = {}
        self.lost: list[tuple[str, str]] = []

    def lose(self, path: str, why: str) -> None:
        self.lost.append((path, why))

    def cpu(self, cpu: Mapping[str, Any]) -> None:
        guest = cpu["guest"]
        for field, value in cpu.items():
            path = f"spec.cpu.{field}"
            if field == "guest":
                continue
            if field == "dedicatedCPUPlacement" and value is True:
                self.specs["hw:cpu_policy"] = "dedicated"
            elif field == "isolateEmulatorThread" and value is True and cpu.get("dedicatedCPUPlacement"):
                self.specs["hw:emulator_threads_policy"] = "isolate"
            elif field == "numa" and value == {"guestMappingPassthrough": {}}:
                self.specs["hw:numa_nodes"] = "1"
            elif field == "realtime" and isinstance(value, Mapping):
                self.specs["hw:cpu_realtime"] = "yes"
                mask = value.get("mask")
                if mask:
                    prefix = f"0-{guest - 1},"
                    self.specs["hw:cpu_realtime_mask"] = mask[len(prefix):] if mask.startswith(prefix + "^") else mask
            elif field == "maxSockets":
                self.specs["hw:cpu_max_sockets"] = str(value)
            else:
                self.lose(path, "no Nova extra spec sets it" if field == "model" or value is not True
                          else "no Nova extra spec expresses it here")

    def memory(self, memory: Mapping[str, Any]) -> None:
        for field, value in memory.items():
            if field == "guest":
                continue
            if field == "hugepages" and value.get("pageSize") in _PAGE_SPEC and len(value) == 1:
                self.specs["hw:mem_page_size"] = _PAGE_SPEC[value["pageSize"]]
            elif field == "overcommitPercent":
                self.lose("spec.memory.overcommitPercent", "Nova overcommits per host (ram_allocation_ratio)")
            else:
                self.lose(f"spec.memory.{field}", "no Nova extra spec expresses it")

    def launch_security(self, launch: Mapping[str, Any]) -> None:
        if len(launch) != 1:
            self.lose("spec.launchSecurity", "several memory encryption technologies at once")
            return
        (kind, settings), = launch.items()
        model = _MODEL_OF.get(kind)
        if kind == "sev" and settings == {"policy": {"encryptedState": True}}:
            model = "amd-sev-es"
        elif settings != {}:
            model = None
        if model is None:
            self.lose("spec.launchSecurity", "attestation and session settings have no Nova extra spec")
            return
        self.specs["hw:mem_encryption"] = "true"
        self.specs["hw:mem_encryption_model"] = model

    def devices(self, field: str, devices: Sequence[Mapping[str, Any]]) -> None:
        prefix = "gpu" if field == "gpus" else "hostdevice"
        names_ok = all(d.get("name") == f"{prefix}{i + 1}" and set(d) == {"name", "deviceName"}
                       for i, d in enumerate(devices))
        counts: dict[str, int] = {}
        for device in devices:
            counts[device.get("deviceName", "")] = counts.get(device.get("deviceName", ""), 0) + 1
        if field == "gpus":
            resource = self.options.vgpu_resource()
            if names_ok and set(counts) == {resource}:
                self.specs["resources:VGPU"] = str(len(devices))
            else:
                self.lose("spec.gpus", "only the site's vGPU resource maps to resources:VGPU")
            return
        by_alias = {resource: alias for alias, resource in self.options.pci_alias_resources.items()}
        by_class = {resource: cls for cls, resource in self.options.resource_class_resources.items()}
        if not names_ok or not all(r in by_alias or r in by_class for r in counts):
            self.lose("spec.hostDevices", "a device resource the site maps to no [pci] alias or resource class")
            return
        ordered = list(counts)
        aliases = [r for r in ordered if r in by_alias]
        classes = [r for r in ordered if r not in by_alias]
        if ordered != aliases + classes:
            self.lose("spec.hostDevices", "PCI aliases must come before resource classes")
            return
        if aliases:
            self.specs["pci_passthrough:alias"] = ",".join(f"{by_alias[r]}:{counts[r]}" for r in aliases)
        for resource in classes:
            self.specs[f"resources:{by_class[resource]}"] = str(counts[resource])

    def node_selector(self, selector: Mapping[str, str]) -> None:
        options = self.options
        for label, value in selector.items():
            if label.startswith(options.trait_label_prefix) and value == "true":
                self.specs[f"trait:{label[len(options.trait_label_prefix):]}"] = "required"
            elif label.startswith(options.aggregate_label_prefix):
                self.specs[f"aggregate_instance_extra_specs:{label[len(options.aggregate_label_prefix):]}"] = value
            elif label.startswith(options.capability_label_prefix):
                name = label[len(options.capability_label_prefix):].replace(".", ":")
                self.specs[f"capabilities:{name}"] = value
            else:
                self.lose(f"spec.nodeSelector.{label}", "not a trait, aggregate or capability label")

    def preference(self, spec: Mapping[str, Any], guest: int) -> None:
        # Firmware first: whether preferredSmm comes back depends on the secure boot it reads.
        for section in sorted(spec, key=lambda name: name != "firmware"):
            content = spec[section]
            if not isinstance(content, Mapping):
                self.lose(f"preference.spec.{section}", "no flavor extra spec sets it (an image property at most)")
                continue
            for field, value in content.items():
                if not self._preference_field(section, field, value, guest):
                    self.lose(f"preference.spec.{section}.{field}",
                              "no flavor extra spec sets it (an image property at most)")
        cpu = spec.get("cpu")
        if isinstance(cpu, Mapping):
            self._topology_as_rendered(cpu, guest)

    def _topology_as_rendered(self, cpu: Mapping[str, Any], guest: int) -> None:
        """Report the topology fields the mapping spells differently from the source (or not at all).

        The mapping writes one canonical spelling per sockets x cores x threads layout: 8 vCPUs as
        1 x 4 x 2 come back as CoresThreads ratio 2, never as SocketsCoresThreads ratio 4.
        """
        keys = ("hw:cpu_sockets", "hw:cpu_cores", "hw:cpu_threads")
        specs = {k: v for k, v in self.specs.items() if k in keys}
        flavor = {"id": "topology", "name": "topology", "vcpus": guest, "ram": 1, "disk": 0, "extra_specs": specs}
        rendered = flavor_to_kubevirt(flavor, self.options).preferences[0]["spec"].get("cpu", {})
        layout = "x".join(specs.get(k, "?") for k in keys)
        for field in ("preferredCPUTopology", "spreadOptions"):
            path = f"preference.spec.cpu.{field}"
            if field not in cpu or rendered.get(field) == cpu[field] or any(p == path for p, _ in self.lost):
                continue
            if field in rendered:
                self.lose(path, f"the flavor keeps {guest} vCPUs as {layout} (sockets x cores x threads), "
                                f"which the mapping writes as {field}: {json.dumps(rendered[field], sort_keys=True)}")
            else:
                self.lose(path, f"no sockets, cores and threads of {guest} vCPUs reproduce it")

    def _preference_field(self, section: str, field: str, value: Any, guest: int) -> bool:
        specs = self.specs
        if section == "cpu" and field == "preferredCPUTopology":
            axis = {"sockets": "hw:cpu_sockets", "preferSockets": "hw:cpu_sockets", "cores": "hw:cpu_cores",
                    "preferCores": "hw:cpu_cores", "threads": "hw:cpu_threads", "preferThreads": "hw:cpu_threads"}
            if value in axis:
                specs[axis[value]] = str(guest)
                return True
            return value in ("spread", "preferSpread")  # settled with spreadOptions
        if section == "cpu" and field == "spreadOptions":
            across, ratio = value.get("across", "SocketsCores"), int(value.get("ratio", 2))
            if across == "SocketsCores" and guest % ratio == 0:
                specs["hw:cpu_sockets"], specs["hw:cpu_cores"] = str(guest // ratio), str(ratio)
            elif across == "CoresThreads" and guest % 2 == 0:
                specs["hw:cpu_sockets"], specs["hw:cpu_cores"], specs["hw:cpu_threads"] = "1", str(guest // 2), "2"
            elif across == "SocketsCoresThreads" and guest % (2 * ratio) == 0:
                specs["hw:cpu_sockets"], specs["hw:cpu_cores"] = str(guest // (2 * ratio)), str(ratio)
                specs["hw:cpu_threads"] = "2"
            else:
                return False
            return True
        if section == "devices":
            if field == "preferredTPM":
                specs["hw:tpm_version"] = "2.0"
                if value.get("persistent"):
                    specs["hw:tpm_secret_security"] = "host"
                return set(value) <= {"persistent"}
            simple = {"preferredAutoattachSerialConsole": ("hw:serial_port_count", "1" if value else "0"),
                      "preferredSoundModel": ("hw:sound_model", str(value)),
                      "preferredNetworkInterfaceMultiQueue": ("hw:vif_multiqueue_enabled", str(value).lower()),
                      "preferredRng": ("hw_rng:allowed", "true")}
            if field in simple and (field != "preferredSoundModel" or value in ("ich9", "ac97")):
                key, text = simple[field]
                specs[key] = text
                return field != "preferredRng" or value == {}
            return False
        if section == "firmware" and field == "preferredEfi" and isinstance(value.get("secureBoot"), bool):
            specs["os:secure_boot"] = "required" if value["secureBoot"] else "disabled"
            for other in sorted(set(value) - {"secureBoot"}):
                self.lose(f"preference.spec.firmware.preferredEfi.{other}", "no flavor extra spec sets it")
            return True
        if section == "features" and field == "preferredKvm" and set(value) == {"hidden"}:
            specs["hw:hide_hypervisor_id"] = str(value["hidden"]).lower()
            return True
        # The mapping adds preferredSmm beside secure boot only.
        return section == "features" and field == "preferredSmm" and value == {} and \
            specs.get("os:secure_boot") == "required"


def import_instancetype(instancetype: Mapping[str, Any], preference: Mapping[str, Any] | None = None,
                        options: MappingOptions = DEFAULT_OPTIONS, *, check: FlavorCheck | None = None
                        ) -> ImportResult:
    """A Nova flavor whose extra specs reproduce this instancetype (and preference), with what is lost.

    ``check``: Nova's validation of POST /flavors (api/flavor_checks.py), which the flavor must pass."""
    is_public = _kind_is_cluster(instancetype)
    metadata = instancetype.get("metadata") or {}
    spec = instancetype.get("spec") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise NotAnInstancetype("metadata.name is missing")
    if "cpu" not in spec or "memory" not in spec:
        raise NotAnInstancetype(f"{name}: spec.cpu and spec.memory are required")
    importer = _Importer(instancetype, options)
    ram = _mib(spec["memory"]["guest"])
    if ram != int(ram):
        importer.lose("spec.memory.guest", f"{spec['memory']['guest']} is not a whole number of MiB; rounded up")
    for field, value in spec.items():
        if field == "cpu":
            importer.cpu(value)
        elif field == "memory":
            importer.memory(value)
        elif field == "launchSecurity":
            importer.launch_security(value)
        elif field in ("gpus", "hostDevices"):
            importer.devices(field, value)
        elif field == "nodeSelector":
            importer.node_selector(value)
        else:
            importer.lose(f"spec.{field}", "no Nova extra spec expresses it")
    if preference is not None:
        importer.preference(preference.get("spec") or {}, spec["cpu"]["guest"])
    flavor: dict[str, Any] = {
        "id": name,
        "name": name,
        "description": _description((metadata.get("annotations") or {}).get(KUBEVIRT_DESCRIPTION), importer),
        "ram": math.ceil(ram),
        "disk": 0,
        "vcpus": spec["cpu"]["guest"],
        "swap": "",
        EPHEMERAL: 0,
        DISABLED: False,
        IS_PUBLIC: is_public,
        "rxtx_factor": 1.0,
        "extra_specs": importer.specs,
    }
    if not is_public:
        namespace = metadata.get("namespace")
        flavor["access"] = [namespace] if namespace else []
        importer.lose("metadata.namespace", "the namespace is taken as the project id")
    try:
        if check is not None:  # what is printed must be a flavor POST /flavors accepts
            check(flavor)
        check_extra_specs(flavor)
    except InvalidFlavor as refusal:
        raise NotAnInstancetype(f"{name}: no flavor Nova accepts reproduces it: {refusal}") from None
    return ImportResult(flavor, tuple(importer.lost))


def _description(text: Any, importer: _Importer) -> str | None:
    """The instancetype's description as Nova accepts one: printable characters, at most 65535."""
    if not isinstance(text, str):
        return None
    flat = "".join(c for c in " ".join(text.split()) if c.isprintable())[:_DESCRIPTION_MAX]
    if flat != text:
        importer.lose(f"metadata.annotations.{KUBEVIRT_DESCRIPTION}",
                      "line breaks and other characters Nova refuses in a description became spaces")
    return flat
