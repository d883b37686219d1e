"""Kubernetes names for Nova flavors and projects: a contract between OpenKeel components.

The API, the controller and the CLI all derive object names from these functions, so changing
them renames every object in every cluster: never change them silently (tests pin them).
"""

from __future__ import annotations

import hashlib
import json
import re

# A DNS-1123 *label*: dots are refused on purpose. Every instancetype virt-operator installs from
# common-instancetypes has a dot in its name (u1.medium, cx1.2xlarge...), so a kept flavor id can
# never take such a name; see docs/kubevirt-mapping.md, "Object names".
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INVALID_LABEL_CHARS = re.compile(r"[^a-z0-9-]+")

# Dot-less names of the preferences virt-operator deploys (common-instancetypes v1.7.0). A flavor
# whose id is one of these is never kept as it is, because the operator overwrites same-named cluster
# objects without any ownership check. The operator never produces an "fl-" name.
OPERATOR_RESERVED_NAMES = frozenset(
    {"alpine", "cirros", "debian", "fedora", "legacy", "linux", "oraclelinux", "sles", "ubuntu"}
)

NAME_PREFIX = "fl-"
# "fl-" + 60 characters = 63: the name also goes into label values on VMs, which stop at 63.
PREFIXED_ID_MAX = 60


def is_dns1123_label(value: str) -> bool:
    """True if value is a lower-case DNS-1123 label (at most 63 characters, no dots)."""
    return _DNS1123_LABEL.fullmatch(value) is not None


def hashed_name(flavor_id: str) -> str:
    """The encoded name of an id that cannot be shown: ``fl-<16 hex of sha1(id)>``."""
    return NAME_PREFIX + hashlib.sha1(flavor_id.encode("utf-8")).hexdigest()[:16]


def _kept(flavor_id: str) -> bool:
    return (_DNS1123_LABEL.fullmatch(flavor_id) is not None and not flavor_id.startswith(NAME_PREFIX)
            and flavor_id not in OPERATOR_RESERVED_NAMES)


def kubernetes_name(flavor_id: str) -> str:
    """Object name of a flavor, in three cases tried in order:

    1. a lower-case DNS-1123 label that does not start with ``fl-`` (and is no name virt-operator
       deploys) is kept: ``1``, ``42``, UUIDs, ``m1-small``;
    2. a lower-case DNS-1123 subdomain of at most 60 characters becomes ``fl-<id>``: ``m1.small`` ->
       ``fl-m1.small``. The operator's catalogue (``u1.*``, ``m1.*``...) never starts with ``fl-``;
    3. anything else becomes ``fl-<16 hex of sha1(id)>``.

    Case 1 never starts with ``fl-``; case 2 never gives ``fl-`` + 16 hex digits, because such an id is a
    label kept by case 1. So two ids never share a name (short of a sha1 collision).
    """
    if _kept(flavor_id):
        return flavor_id
    if len(flavor_id) <= PREFIXED_ID_MAX and _DNS1123_SUBDOMAIN.fullmatch(flavor_id) is not None:
        return NAME_PREFIX + flavor_id
    return hashed_name(flavor_id)


def former_names(flavor_id: str) -> tuple[str, ...]:
    """Names earlier releases gave this flavor's objects, where they differ from today's.

    Before readable names, every id that was not kept was hashed (``m1.small`` ->
    ``fl-83f488446f2fada0``); the controller moves objects it finds under a former name.
    """
    former = flavor_id if _kept(flavor_id) else hashed_name(flavor_id)
    return () if former == kubernetes_name(flavor_id) else (former,)


def project_namespace(project_id: str, prefix: str = "") -> str:
    """Namespace of a project: ``prefix`` + the project id sanitised to a DNS-1123 label.

    Keystone ids (32 lower-case hex digits) are kept as they are. When sanitising had to change
    anything, or the result is too long, 8 hex digits of sha1(project id) are appended so that two
    different projects never share a namespace.
    """
    candidate = prefix + project_id
    if _DNS1123_LABEL.fullmatch(candidate) is not None:
        return candidate
    digest = hashlib.sha1(project_id.encode("utf-8")).hexdigest()[:8]
    cleaned = _INVALID_LABEL_CHARS.sub("-", candidate.lower()).strip("-")
    cleaned = cleaned[: 63 - len(digest) - 1].rstrip("-")
    return f"{cleaned}-{digest}" if cleaned else f"p-{digest}"


# --- a server's objects: named by the server's UUID, in its project's namespace ---------------
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def server_vm_name(server_uuid: str) -> str:
    """Name of a server's VirtualMachine (and VMI): its UUID, lower case."""
    name = server_uuid.lower()
    if _UUID.fullmatch(name) is None:
        raise ValueError(f"{server_uuid!r} is not a server UUID")
    return name


def server_sizing_name(server_uuid: str, spec: object) -> str:
    """Name of a server's own instancetype (or preference) of spec ``spec``: ``<uuid>-<10 hex>``, the
    digest of the spec. A new spec is a new name, which is what makes KubeVirt take a new revision (it
    never looks at an object again under a name it already froze); the same spec keeps its name."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{server_vm_name(server_uuid)}-{digest[:10]}"


def server_root_volume(server_uuid: str) -> str:
    """Name of the server's root DataVolume (and PVC)."""
    return f"{server_vm_name(server_uuid)}-root"


def server_user_data_secret(server_uuid: str) -> str:
    """Name of the Secret holding the server's cloud-init user data."""
    return f"{server_vm_name(server_uuid)}-user-data"


def server_ssh_key_secret(server_uuid: str) -> str:
    """Name of the Secret holding the server's key pair public key."""
    return f"{server_vm_name(server_uuid)}-ssh-key"


def server_image_token_secret(server_uuid: str) -> str:
    """Name of the Secret holding the header the root disk's import sends to Glance."""
    return f"{server_vm_name(server_uuid)}-image-token"
