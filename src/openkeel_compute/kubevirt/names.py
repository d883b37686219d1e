"""Kubernetes names for Nova flavors and projects: a contract between OpenKeel components.

The API, the controller and the CLI all derive object names from these functions, so changing
them renames every object in every cluster: never change them silently (tests pin them).
"""

from __future__ import annotations

import hashlib
import re

# A DNS-1123 *label*: dots are refused on purpose. Every instancetype virt-operator installs from
# common-instancetypes has a dot in its name (u1.medium, cx1.2xlarge...), so a kept flavor id can
# never take such a name; see docs/kubevirt-mapping.md, "Protection from virt-operator".
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_INVALID_LABEL_CHARS = re.compile(r"[^a-z0-9-]+")

# Dot-less names of the preferences virt-operator deploys (common-instancetypes v1.7.0). A flavor
# whose id is one of these is hashed, because the operator overwrites same-named cluster objects
# without any ownership check. The operator never produces an "fl-" name.
OPERATOR_RESERVED_NAMES = frozenset(
    {"alpine", "cirros", "debian", "fedora", "legacy", "linux", "oraclelinux", "sles", "ubuntu"}
)

HASHED_NAME_PREFIX = "fl-"


def is_dns1123_label(value: str) -> bool:
    """True if value is a lower-case DNS-1123 label (at most 63 characters, no dots)."""
    return _DNS1123_LABEL.fullmatch(value) is not None


def hashed_name(flavor_id: str) -> str:
    """The encoded name of an id that cannot be kept: ``fl-<16 hex of sha1(id)>``."""
    return HASHED_NAME_PREFIX + hashlib.sha1(flavor_id.encode("utf-8")).hexdigest()[:16]


def kubernetes_name(flavor_id: str) -> str:
    """Object name of a flavor: the id itself when it is a safe DNS-1123 label, else ``fl-<sha1>``.

    Ids starting with ``fl-`` are hashed too, so that a kept id can never equal the encoding of
    another id.
    """
    if (
        _DNS1123_LABEL.fullmatch(flavor_id) is not None
        and not flavor_id.startswith(HASHED_NAME_PREFIX)
        and flavor_id not in OPERATOR_RESERVED_NAMES
    ):
        return flavor_id
    return hashed_name(flavor_id)


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
