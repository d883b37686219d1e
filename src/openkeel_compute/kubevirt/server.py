"""A Nova server as KubeVirt objects: pure, data in and objects out (no I/O).

``compose`` turns a server row, the flavor the server keeps, its Glance image and its key pair
into the objects the controller applies: Secrets, the server's own instancetype and preference (copies
of its flavor's, in its namespace, so that its VM never depends on the catalogue's objects), and the
VirtualMachine. See docs/kubevirt-mapping.md, "Servers".
"""

from __future__ import annotations

import base64
import dataclasses
import email
import hashlib
import json
import math
import urllib.parse
from collections.abc import Mapping, Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from typing import Any, NamedTuple

from openkeel_compute.kubevirt.admission import label_value_ok
from openkeel_compute.kubevirt.attachments import attachment_name, port_interface_name
from openkeel_compute.kubevirt.flavor import Flavor, parse_flavor
from openkeel_compute.kubevirt.guard import check_vm
from openkeel_compute.kubevirt.image import preference_with_image
from openkeel_compute.kubevirt.mapping import (
    CLOUD_INIT_DISK,
    INSTANCETYPE,
    INSTANCETYPE_API,
    MANAGED_BY,
    MANAGER,
    PREFERENCE,
    ROOT_DISK,
    SWAP_USER_DATA,
    VM_API,
    flavor_to_kubevirt,
)
from openkeel_compute.kubevirt.names import (
    is_dns1123_label,
    server_image_token_secret,
    server_root_volume,
    server_sizing_name,
    server_ssh_key_secret,
    server_user_data_secret,
    server_vm_name,
)
from openkeel_compute.kubevirt.netdata import network_config, network_data
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions
from openkeel_compute.model.flavor import api_body_of_row
from openkeel_compute.model.sysmeta import REQUESTED_NETWORKS, requested_nodes

SERVER_ID = "openkeel.io/server-id"
PROJECT_ID = "openkeel.io/project-id"
ANN_DISPLAY_NAME = "openkeel.io/display-name"
ANN_METADATA = "openkeel.io/server-metadata"
POD_NETWORK = "default"  # the name of the pod network and its interface inside the VM
EMPTY_USER_DATA = b"#cloud-config\n{}\n"
USER_DATA_KEY = "userdata"  # the Secret key KubeVirt reads user data from
NETWORK_DATA_KEY = "networkdata"  # and network data (networkDataSecretRef)
SSH_KEY_KEY = "key"
IMAGE_HEADER_KEY = "header"
GiB = 1024**3


@dataclasses.dataclass(frozen=True, slots=True)
class ServerOptions:
    """What composing a server needs to know about the site; every field has a default."""

    #: Glance's public endpoint as the cluster reaches it; the root disk imports <url>/v2/images/<id>/file
    image_endpoint: str = "http://127.0.0.1:9292"
    #: Nova's [DEFAULT] force_config_drive: always a config drive, whatever the request says
    force_config_drive: bool = False
    #: Nova's [DEFAULT] shutdown_timeout (seconds): the guest's grace period at stop
    shutdown_timeout: int = 60
    #: storage class of the server's disks (None: the cluster's default)
    storage_class: str | None = None
    #: the flavor mapping's options (namespace prefix, device resources...)
    mapping: MappingOptions = DEFAULT_OPTIONS
    #: Nova's [DEFAULT] default_availability_zone: the zone of nodes without a zone label
    default_availability_zone: str = "nova"


DEFAULT_SERVER_OPTIONS = ServerOptions()


class ServerObjects(NamedTuple):
    """Everything one server becomes, in the order to apply them."""

    namespace: str
    secrets: tuple[dict[str, Any], ...]
    instancetype: dict[str, Any]  # the server's own instancetype: its flavor's, in its namespace
    preference: dict[str, Any]  # the server's own preference: its flavor's with its image's properties
    vm: dict[str, Any]

    @property
    def sizing(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The server's own instancetype and preference: what its VM's matchers name."""
        return self.instancetype, self.preference

    def documents(self) -> list[dict[str, Any]]:
        """Secrets, the instancetype and the preference first: the VM refers to them."""
        return [*self.secrets, self.instancetype, self.preference, self.vm]

    def owned_by(self, vm: Mapping[str, Any] | None) -> ServerObjects:
        """The objects with the server's instancetype and preference owned by ``vm`` (the VirtualMachine as
        the cluster has it, with its uid): they go with it, as its ControllerRevisions do. Unchanged when
        there is no VM yet (a build: they are owned once it exists)."""
        uid = ((vm or {}).get("metadata") or {}).get("uid")
        if not uid:
            return self
        ref = {"apiVersion": VM_API, "kind": "VirtualMachine", "name": self.vm["metadata"]["name"], "uid": uid,
               "controller": False, "blockOwnerDeletion": False}
        owned = [{**body, "metadata": {**body["metadata"], "ownerReferences": [ref]}} for body in self.sizing]
        return self._replace(instancetype=owned[0], preference=owned[1])


def flavor_from_copy(flavor: Mapping[str, Any] | Flavor, project_id: str) -> Flavor:
    """The Flavor of a server's frozen flavor copy (a Flavor 1.2's fields, as FlavorCopy.cur holds them),
    checked as the mapping checks a flavor (its extra specs against Nova's validators).

    A private flavor is read as shared with the server's project only: the VM uses that project's copy.
    """
    parsed = flavor if isinstance(flavor, Flavor) else parse_flavor(api_body_of_row(flavor))
    return parsed.for_project(project_id)


def root_disk_gib(flavor: Flavor, image: Mapping[str, Any]) -> int:
    """Size of the root disk: the flavor's, else the image's virtual size (else size, else min_disk), in GiB."""
    if flavor.disk:
        return flavor.disk
    for field in ("virtual_size", "size"):
        value = image.get(field)
        if value:
            return max(1, math.ceil(int(value) / GiB))
    min_disk = int(image.get("min_disk") or 0)
    if min_disk:
        return min_disk
    raise ValueError(f"image {image.get('id')} has no size: a zero-disk flavor needs the image's size")


def mac_address(server_uuid: str) -> str:
    """A stable MAC for the server's interface, in Nova's fa:16:3e prefix (kept across new launcher pods)."""
    digest = hashlib.sha1(server_uuid.encode()).digest()
    return "fa:16:3e:" + ":".join(f"{byte:02x}" for byte in digest[:3])


def guest_hostname(hostname: str | None) -> str | None:
    """The VM's hostname: the first label of Nova's hostname, or None when KubeVirt would refuse it."""
    if not hostname:
        return None
    label = hostname.split(".", 1)[0].lower()[:63].rstrip("-")
    return label if is_dns1123_label(label) else None


def shutdown_grace(image: Mapping[str, Any], options: ServerOptions) -> int:
    """The guest's grace period at stop: the image's os_shutdown_timeout if it is a whole number of seconds."""
    value = (image.get("properties") or {}).get("os_shutdown_timeout")
    try:
        seconds = int(str(value).strip())
    except ValueError:
        return options.shutdown_timeout
    return seconds if seconds >= 0 else options.shutdown_timeout


def wants_config_drive(server: Mapping[str, Any], options: ServerOptions) -> bool:
    """Nova's rule: a config drive when the request asked for one or the site forces it."""
    requested = server.get("config_drive")
    return options.force_config_drive or (requested not in (None, "", False)
                                          and str(requested).lower() not in ("false", "0"))


_PART_TYPES = (
    (b"#cloud-config", "text/cloud-config"), (b"#!", "text/x-shellscript"), (b"#include", "text/x-include-url"),
    (b"#cloud-boothook", "text/cloud-boothook"), (b"#part-handler", "text/part-handler"),
    (b"#upstart-job", "text/upstart-job"), (b"## template: jinja", "text/jinja2"),
)


def _part(data: bytes) -> MIMENonMultipart:
    mime = next((kind for prefix, kind in _PART_TYPES if data.startswith(prefix)), "text/plain")
    if data[:2] == b"\x1f\x8b":  # gzip: cloud-init decompresses it before looking at the content
        mime = "application/x-gzip"
    maintype, subtype = mime.split("/")
    part = MIMENonMultipart(maintype, subtype)
    part.set_payload(base64.b64encode(data).decode())
    part["Content-Transfer-Encoding"] = "base64"
    return part


def user_data(server_user_data: str | None, swap: bool) -> bytes:
    """The cloud-init user data: the server's (Nova keeps it base64), plus the swap lines when the flavor has swap.

    Both together become a MIME multipart archive, which cloud-init reads part by part.
    """
    own = base64.b64decode(server_user_data) if server_user_data else b""
    if not swap:
        return own or EMPTY_USER_DATA
    if not own:
        return SWAP_USER_DATA.encode()
    archive = MIMEMultipart(boundary="==openkeel-" + hashlib.sha1(own).hexdigest() + "==")
    archive.attach(_part(SWAP_USER_DATA.encode()))
    if own.startswith((b"Content-Type:", b"MIME-Version:")):
        theirs = email.message_from_bytes(own)
        if theirs.is_multipart():  # already an archive: its parts join the swap part
            for part in theirs.get_payload():
                archive.attach(part)
            return archive.as_bytes()
    archive.attach(_part(own))
    return archive.as_bytes()


def _secret(name: str, namespace: str, labels: dict[str, str], data: dict[str, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


def image_token_secret(server_uuid: str, namespace: str, token: str, project_id: str | None = None
                       ) -> dict[str, Any]:
    """The Secret the root disk's import sends to Glance: one header line, ``X-Auth-Token:<token>``.

    The token is a service credential; the controller rewrites this Secret while the import runs,
    because CDI's importer reads it again at each retry.
    """
    return _secret(server_image_token_secret(server_uuid), namespace, _labels(server_uuid, project_id),
                   {IMAGE_HEADER_KEY: f"X-Auth-Token:{token}".encode()})


def _labels(server_uuid: str, project_id: str | None) -> dict[str, str]:
    labels = {MANAGED_BY: MANAGER, SERVER_ID: server_uuid}
    if project_id is not None and label_value_ok(project_id):
        labels[PROJECT_ID] = project_id
    return labels


def compose(server: Mapping[str, Any], flavor: Mapping[str, Any] | Flavor, image: Mapping[str, Any],
            public_key: str | None, options: ServerOptions = DEFAULT_SERVER_OPTIONS, *,
            image_token: str | None = None, root_volume: str | None = None,
            ports: Sequence[Mapping[str, Any]] | None = None) -> ServerObjects:
    """The KubeVirt objects of one server.

    ``server``: the instance row (uuid, project_id, hostname, display_name, user_data as Nova keeps it
    (base64), config_drive) and optionally ``metadata`` (the server's metadata items) and
    ``system_metadata`` (``requested_networks`` = "none": no network interface). ``flavor``: the
    frozen flavor copy (FlavorCopy.cur) or a Flavor. ``image``: the Glance image (id, name, size,
    virtual_size, min_ram, min_disk, properties). ``public_key``: the key pair's public key, or None.
    ``image_token``: when given, the Glance header Secret is composed too. ``root_volume``: the name
    of the root DataVolume when it is not the first one (a rebuild gives the server a new root disk
    under a new name, so that the old one's claim is never adopted). ``ports``: the server's Neutron
    ports (``port_id``, ``mac``, ``network_id``), each an interface with the port's MAC on the Multus
    network of its Neutron network (kubevirt/attachments.py), in their order; the pod network is then
    not added.

    Raises ImageRefused where Nova refuses the flavor and image together, and RefusedByKubeVirt if an
    object would be refused by the cluster (a bug in this module, never the user's fault).
    """
    uuid = server_vm_name(str(server["uuid"]))
    project_id = str(server["project_id"])
    namespace = options.mapping.namespace_for(project_id)
    parsed = flavor_from_copy(flavor, project_id)
    objects = flavor_to_kubevirt(parsed, options.mapping)
    it_spec = objects.instancetypes[0]["spec"]
    image_pref = preference_with_image(parsed, image, options.mapping)
    labels = _labels(uuid, project_id)

    vm = _vm_from_fragment(objects.vm)
    meta = vm["metadata"]
    meta["name"] = uuid
    meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    meta["annotations"][PROJECT_ID] = project_id
    if server.get("display_name") is not None:
        meta["annotations"][ANN_DISPLAY_NAME] = str(server["display_name"])
    if server.get("metadata"):
        meta["annotations"][ANN_METADATA] = json.dumps(dict(server["metadata"]), sort_keys=True,
                                                       separators=(",", ":"))
    spec = vm["spec"]
    spec["runStrategy"] = "Manual"

    # The server's own instancetype and preference, in its namespace: its VM never depends on the
    # catalogue's objects (a flavor not synced yet, a private flavor its project cannot see, access
    # removed, the flavor deleted). Named by their spec, so a new size or a new image is a new name.
    it_name = server_sizing_name(uuid, it_spec)
    instancetype = {"apiVersion": INSTANCETYPE_API, "kind": INSTANCETYPE,
                    "metadata": {"name": it_name, "namespace": namespace, "labels": dict(labels)},
                    "spec": json.loads(json.dumps(it_spec))}
    pref_name = server_sizing_name(uuid, image_pref.spec)
    preference = {"apiVersion": INSTANCETYPE_API, "kind": PREFERENCE,
                  "metadata": {"name": pref_name, "namespace": namespace, "labels": dict(labels)},
                  "spec": json.loads(json.dumps(image_pref.spec))}
    spec["instancetype"] = {"kind": INSTANCETYPE, "name": it_name}
    spec["preference"] = {"kind": PREFERENCE, "name": pref_name}

    # The root disk: imported from Glance over HTTP with the header Secret.
    root_name = root_volume or server_root_volume(uuid)
    url = (options.image_endpoint.rstrip("/") + "/v2/images/"
           + urllib.parse.quote(str(image["id"]), safe="") + "/file")
    storage: dict[str, Any] = {"resources": {"requests": {"storage": f"{root_disk_gib(parsed, image)}Gi"}}}
    if options.storage_class:
        storage["storageClassName"] = options.storage_class
    http: dict[str, Any] = {"url": url}
    if image_token is not None:  # without a token (no image service credential) the import sends no header
        http["secretExtraHeaders"] = [server_image_token_secret(uuid)]
    spec["dataVolumeTemplates"] = [{
        "metadata": {"name": root_name, "labels": dict(labels)},
        "spec": {"source": {"http": http}, "storage": storage},
    }]

    template = spec["template"]
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = dict(labels)
    tspec = template["spec"]
    domain = tspec["domain"]
    domain["firmware"] = {"uuid": str(server["uuid"]).lower()}
    devices = domain["devices"]
    if ports:
        devices["interfaces"] = [{"name": port_interface_name(str(p["port_id"])), "bridge": {},
                                  "macAddress": str(p["mac"])} for p in ports]
        tspec["networks"] = [{"name": port_interface_name(str(p["port_id"])),
                              "multus": {"networkName": attachment_name(str(p["network_id"]))}} for p in ports]
    elif (server.get("system_metadata") or {}).get(REQUESTED_NETWORKS) == "none" or ports is not None:
        # networks "none" (or no port on Neutron): no interface at all (KubeVirt would otherwise add the
        # pod network itself)
        devices["interfaces"] = []
        devices["autoattachPodInterface"] = False
        tspec["networks"] = []
    else:
        devices["interfaces"] = [{"name": POD_NETWORK, "masquerade": {}, "macAddress": mac_address(uuid)}]
        tspec["networks"] = [{"name": POD_NETWORK, "pod": {}}]
    # The serial console is logged: KubeVirt's launcher pod gets a guest-console-log container whose log
    # is what the guest printed (os-getConsoleOutput). Whether there is a serial console at all stays the
    # flavor's (hw:serial_port_count 0: preferredAutoattachSerialConsole false, and then nothing is logged).
    devices["logSerialConsole"] = True
    hostname = guest_hostname(server.get("hostname"))
    if hostname:
        tspec["hostname"] = hostname
    tspec["terminationGracePeriodSeconds"] = shutdown_grace(image, options)
    if server.get("availability_zone"):
        require_zone(tspec, str(server["availability_zone"]), options.default_availability_zone)
    nodes = requested_nodes(server.get("system_metadata"))
    if nodes:  # a forced or requested host
        require_nodes(tspec, nodes)
    if server.get("node"):  # the node Placement gave the server its resources on
        require_node(tspec, str(server["node"]))

    # Disks: the fragment's, the root volume renamed, cloud-init from a Secret.
    disks = [d for d in devices["disks"] if d["name"] != CLOUD_INIT_DISK]
    volumes = [v for v in tspec["volumes"] if v["name"] != CLOUD_INIT_DISK]
    for volume in volumes:
        if volume["name"] == ROOT_DISK:
            volume["dataVolume"] = {"name": root_name}
    swap = any("cloudInitNoCloud" in v for v in tspec["volumes"] if v["name"] == CLOUD_INIT_DISK)
    config_drive = wants_config_drive(server, options)
    source = "cloudInitConfigDrive" if config_drive else "cloudInitNoCloud"
    disks.append({"name": CLOUD_INIT_DISK, "disk": {}})
    cloud_init: dict[str, Any] = {"secretRef": {"name": server_user_data_secret(uuid)}}
    volumes.append({"name": CLOUD_INIT_DISK, source: cloud_init})
    devices["disks"] = disks
    tspec["volumes"] = volumes

    init_data = {USER_DATA_KEY: user_data(server.get("user_data"), swap)}
    data = network_data(ports) if ports else None
    if data is not None:  # the ports' addresses for cloud-init: network_data.json on a config drive, v2 for NoCloud
        init_data[NETWORK_DATA_KEY] = json.dumps(data if config_drive else network_config(data),
                                                 sort_keys=True).encode()
        cloud_init["networkDataSecretRef"] = {"name": server_user_data_secret(uuid)}
    secrets = [_secret(server_user_data_secret(uuid), namespace, labels, init_data)]
    if public_key:
        secrets.append(_secret(server_ssh_key_secret(uuid), namespace, labels, {SSH_KEY_KEY: public_key.encode()}))
        tspec["accessCredentials"] = [{"sshPublicKey": {
            "source": {"secret": {"secretName": server_ssh_key_secret(uuid)}},
            "propagationMethod": {"configDrive": {}} if config_drive else {"noCloud": {}},
        }}]
    if image_token is not None:
        secrets.append(image_token_secret(uuid, namespace, image_token, project_id))

    check_vm(vm, it_spec, image_pref.spec, [objects.instancetypes[0]["metadata"], vm["metadata"],
                                            instancetype["metadata"], preference["metadata"]])
    return ServerObjects(namespace, tuple(secrets), instancetype, preference, vm)


ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # a node's name, as the kubelet labels it


#: the pod annotation through which a network plugin gives a pod a chosen address, and its value's form
POD_ADDRESS_ANNOTATIONS: dict[str, tuple[str, str]] = {
    "calico": ("cni.projectcalico.org/ipAddrs", "json"),  # a JSON list of addresses
    "kube-ovn": ("ovn.kubernetes.io/ip_address", "comma"),  # addresses separated by commas
}


def pod_address_annotation(plugin: str, addrs: list[str]) -> tuple[str, str] | None:
    """(annotation, value) asking the network plugin ``plugin`` for ``addrs``; None for no plugin or no address."""
    if plugin not in POD_ADDRESS_ANNOTATIONS or not addrs:
        return None
    name, form = POD_ADDRESS_ANNOTATIONS[plugin]
    return name, json.dumps(addrs) if form == "json" else ",".join(addrs)


def require_zone(tspec: dict[str, Any], zone: str, default_zone: str) -> None:
    """Keep the server on nodes of availability zone ``zone`` (a required node affinity).

    Nodes without a zone label are in the default zone. Node selector terms are alternatives, so
    the zone's requirement joins every term the flavor already put there (forbidden traits).
    """
    wanted = [[{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]]
    if zone == default_zone:
        wanted.append([{"key": ZONE_LABEL, "operator": "DoesNotExist"}])
    _require(tspec, wanted)


def require_nodes(tspec: dict[str, Any], nodes: tuple[str, ...]) -> None:
    """Keep the server on the node named (forced host, requested destination): a required node affinity.

    Every name must match (two different names leave the server nowhere to run, Unschedulable, as a
    forced host and node that disagree leave no valid host in Nova).
    """
    _require(tspec, [[{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]} for node in nodes]])


def _require(tspec: dict[str, Any], wanted: list[list[dict[str, Any]]]) -> None:
    """Add the alternatives ``wanted`` (lists of expressions) to the required node affinity: every term
    already there is combined with each of them."""
    node_affinity = tspec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        dict(term, matchExpressions=list(term.get("matchExpressions", [])) + extra)
        for term in terms for extra in wanted
    ]


def require_node(tspec: dict[str, Any], node: str) -> None:
    """Keep the server on node ``node`` (required node affinity on ``kubernetes.io/hostname``), joined to
    every node selector term already there (zone, forbidden traits)."""
    _require(tspec, [[{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]])


def rebuild_root_volume(server_uuid: str, request_id: str) -> str:
    """Name of the root DataVolume a rebuild gives the server: new for each rebuild (the request
    names it), so the new disk never adopts the old one's claim."""
    suffix = hashlib.sha256(request_id.encode()).hexdigest()[:8]
    return f"{server_root_volume(server_uuid)}-{suffix}"


def _vm_from_fragment(fragment: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of the flavor's VM fragment: the server's objects never share the flavor's dicts."""
    copied: dict[str, Any] = json.loads(json.dumps(fragment))
    return copied
