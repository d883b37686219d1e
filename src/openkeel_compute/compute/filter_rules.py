"""The rules of Nova's scheduler filters that read a host's aggregates, its instances and the request, as pure
functions of what they read (compute/host_filters.py loads it and combines them).

A host's aggregate metadata is read two ways, as Nova's filters read it: ``merged`` (every key of all the
host's aggregates, each value split at commas and stripped, the values of all aggregates together) and
``values_of`` (one key's whole values, one per aggregate that has it).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from openkeel_compute.model import image_properties

LOG = logging.getLogger(__name__)

#: the scope of flavor extra specs AggregateInstanceExtraSpecsFilter reads beside the unscoped ones
EXTRA_SPECS_SCOPE = "aggregate_instance_extra_specs"
#: the aggregate metadata keys whose values are the projects an aggregate's hosts are kept for
TENANT_KEY_PREFIX = "filter_tenant_id"
#: the aggregate metadata key AggregateNumInstancesFilter reads
MAX_INSTANCES_KEY = "max_instances_per_host"

Metadata = Mapping[str, str]


def merged(aggregates: Iterable[Metadata]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for metadata in aggregates:
        for key, value in metadata.items():
            out.setdefault(key, set()).update(part.strip() for part in value.split(","))
    return out


def values_of(aggregates: Iterable[Metadata], key: str) -> set[str]:
    return {metadata[key] for metadata in aggregates if key in metadata}


# --- the operators of extra specs requirements --------------------------------------------------------

def _number(op: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def compare(value: str, wanted: str) -> bool:
        try:
            return op(float(value), float(wanted))
        except ValueError:  # Nova's scheduler fails on a word where a number is compared; here it does not match
            return False
    return compare


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "=": _number(operator.ge),  # "= 4": at least four, as in Nova
    "==": _number(operator.eq),
    "!=": _number(operator.ne),
    ">=": _number(operator.ge),
    "<=": _number(operator.le),
    "<in>": lambda value, wanted: wanted in value,
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


def spec_matches(value: str | None, requirement: str) -> bool:
    """Whether a host's value satisfies a requirement in Nova's extra specs language: ``<op> operand``
    (``=``, ``==``, ``!=``, ``>=``, ``<=`` compare numbers, ``=`` meaning at least; ``s==``, ``s!=``,
    ``s<``, ``s<=``, ``s>``, ``s>=`` compare strings; ``<in>`` a substring; ``<all-in>`` every operand a
    substring), ``<or> a <or> b`` one of the words, and anything else the value itself."""
    words = requirement.split()
    op = words[0] if words else None
    if op != "<or>" and op != "<all-in>" and op not in _OPERATORS:
        return value == requirement
    if value is None:
        return False
    operands = words[1:]
    if op == "<or>":
        return value in operands[0::2]
    if not operands:
        return False
    if op == "<all-in>":
        return all(operand in value for operand in operands)
    return _OPERATORS[op](value, operands[0])


# --- the filters' rules -------------------------------------------------------------------------------

def instance_extra_specs_pass(aggregates: Sequence[Metadata], extra_specs: Mapping[str, str]) -> bool:
    """AggregateInstanceExtraSpecsFilter: every unscoped extra spec of the flavor, and every one in the
    ``aggregate_instance_extra_specs:`` scope (its key without the scope), is a key of the host's
    aggregates with a value (one of the comma-separated values of any of them) that satisfies it. Specs
    of other scopes (``hw:``, ``resources:``, ...) are not read. A flavor without extra specs passes."""
    if not extra_specs:
        return True
    metadata = merged(aggregates)
    for key, requirement in extra_specs.items():
        scope, sep, rest = key.partition(":")
        if sep:
            if scope != EXTRA_SPECS_SCOPE:
                continue
            key = rest
        values = metadata.get(key)
        if not values or not any(spec_matches(v, requirement) for v in values):
            return False
    return True


def tenant_passes(aggregates: Sequence[Metadata], project_id: str) -> bool:
    """AggregateMultiTenancyIsolation: a host in an aggregate with ``filter_tenant_id*`` keys takes the
    servers of the projects they name (comma-separated, all such keys of all its aggregates together)
    only; a host without such keys takes every project's."""
    projects: set[str] = set()
    for key, values in merged(aggregates).items():
        if key.startswith(TENANT_KEY_PREFIX):
            projects |= values
    return not projects or project_id in projects


def isolated_passes(host: str, image_id: str | None, isolated_images: Iterable[str],
                    isolated_hosts: Iterable[str], restrict: bool) -> bool:
    """IsolatedHostsFilter: an isolated image goes to isolated hosts only; with ``restrict`` (Nova's
    restrict_isolated_hosts_to_isolated_images) isolated hosts take isolated images only, and with no
    isolated image configured no server at all. A server without image (volume-backed) is not isolated."""
    host_isolated = host in set(isolated_hosts)
    images = set(isolated_images)
    if not images:
        return not restrict or not host_isolated
    image_isolated = image_id in images
    if restrict:
        return image_isolated == host_isolated
    return not image_isolated or host_isolated


def max_instances(aggregates: Sequence[Metadata], default: int) -> int:
    """AggregateNumInstancesFilter's limit for a host: the least ``max_instances_per_host`` of its
    aggregates, ``default`` ([filter_scheduler] max_instances_per_host) when none has it or one is not a
    whole number (a warning then)."""
    values = values_of(aggregates, MAX_INSTANCES_KEY)
    if not values:
        return default
    try:
        return min(int(v) for v in values)
    except ValueError as exc:
        LOG.warning("Could not decode max_instances_per_host: '%s'", exc)
        return default


# --- AggregateImagePropertiesIsolation ------------------------------------------------------------------

_BOOLEAN_WORDS = """
hw_boot_menu hw_ephemeral_encryption hw_firmware_stateless hw_ipxe_boot hw_locked_memory hw_mem_encryption
hw_pmu hw_qemu_guest_agent hw_time_hpet hw_vif_multiqueue_enabled hw_virtio_packed_ring img_bdm_v2
img_bittorrent img_cache_in_nova img_hide_hypervisor_id img_linked_clone img_use_agent os_require_quiesce
os_skip_agent_inject_files_at_boot os_skip_agent_inject_ssh
"""
_BOOLEAN_PROPERTIES = frozenset(_BOOLEAN_WORDS.split())
_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})


def image_property_values(properties: Mapping[str, str]) -> dict[str, str]:
    """An image's properties as Nova's image metadata holds them: under their names (a legacy name read
    as the property it stands for, the new name winning), booleans as ``True``/``False``, the
    architecture in lower case; properties Nova does not know are left out."""
    out: dict[str, str] = {}
    for key, value in sorted(properties.items(), key=lambda kv: kv[0] in image_properties.NAMES):
        name = image_properties.LEGACY.get(key, key)
        if name not in image_properties.NAMES or value is None:
            continue
        text = str(value)
        if name in _BOOLEAN_PROPERTIES:
            text = str(text.strip().lower() in _TRUE)
        elif name == "hw_architecture":
            text = text.lower()
        out[name] = text
    return out


def image_properties_pass(aggregates: Sequence[Metadata], properties: Mapping[str, str], namespace: str | None,
                          separator: str) -> bool:
    """AggregateImagePropertiesIsolation: for each key of the host's aggregates that is one of Nova's
    image properties (only those under ``namespace`` + ``separator`` when a namespace is set) and that
    the image sets (to a value other than false), the image's value is one of the key's comma-separated
    values. Keys that are not image properties, and properties the image does not set, do not refuse."""
    values = image_property_values(properties)
    for key, options in merged(aggregates).items():
        if namespace and not key.startswith(namespace + separator):
            continue
        if key not in image_properties.NAMES:
            continue
        prop = values.get(key)
        if prop is not None and prop != "False" and prop != "" and prop not in options:
            return False
    return True


# --- the scheduler hints of SimpleCIDRAffinityFilter and JsonFilter --------------------------------------

def hint(hints: Mapping[str, list[str]], name: str, default: Any = None) -> Any:
    """A scheduler hint as Nova's filters read it: its one value, or the list when it has several."""
    value = hints.get(name, default)
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def cidr_passes(host_ip: str | None, near: Any, cidr: Any) -> bool:
    """SimpleCIDRAffinityFilter: with a ``build_near_host_ip`` hint, a host whose address is in that
    address's network of ``cidr`` (its hint, ``/24`` by default: a prefix length or a netmask). A host
    without a known address, or a hint that names no network, passes nowhere."""
    if not near:
        return True
    if not isinstance(near, str) or not isinstance(cidr, str) or not host_ip:
        return False
    try:
        return ipaddress.ip_address(host_ip) in ipaddress.ip_network(near + cidr, strict=False)
    except ValueError:
        return False


def _compare(op: Callable[[Any, Any], bool]) -> Callable[[list], Any]:
    def check(args: list) -> bool:
        if len(args) < 2:
            return False
        try:
            return all(op(args[0], other) for other in args[1:])
        except TypeError:  # a number against a word: Nova's scheduler fails; here the host does not pass
            return False
    return check


_JSON_COMMANDS: dict[str, Callable[[list], Any]] = {
    "=": _compare(operator.eq), "<": _compare(operator.lt), ">": _compare(operator.gt),
    "<=": _compare(operator.le), ">=": _compare(operator.ge),
    "in": lambda args: len(args) >= 2 and args[0] in args[1:],
    "not": lambda args: [not arg for arg in args],
    "or": any, "and": all,
}


def _lookup(text: str, host: Mapping[str, Any]) -> Any:
    if not text:
        return None
    if not text.startswith("$"):
        return text
    name, *path = text[1:].split(".")
    value = host.get(name)
    for item in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(item)
    return value


def _evaluate(query: Any, host: Mapping[str, Any]) -> Any:
    if not query:
        return True
    if not isinstance(query, list) or query[0] not in _JSON_COMMANDS:
        raise ValueError(f"not a JsonFilter command: {query!r}")
    args = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = _evaluate(arg, host)
        elif isinstance(arg, str):
            arg = _lookup(arg, host)
        if arg is not None:
            args.append(arg)
    return _JSON_COMMANDS[query[0]](args)


def json_query_passes(query: Any, host: Mapping[str, Any]) -> bool:
    """JsonFilter: the ``query`` hint, a JSON list ``[command, arg, ...]`` whose commands are ``=``, ``<``,
    ``>``, ``<=``, ``>=`` (the first argument against each of the others), ``in``, ``not``, ``or`` and
    ``and``; an argument is a nested list, a value, or ``$name`` / ``$name.key`` of the host's state
    (unknown: left out). A host passes when the result is true (a list: one of it true). A query that is
    not such JSON passes no host (Nova's scheduler fails the request)."""
    if not query:
        return True
    try:
        result = _evaluate(json.loads(query) if isinstance(query, str) else query, host)
    except (ValueError, TypeError, IndexError):
        return False
    if isinstance(result, list):
        return any(result)
    return bool(result)
