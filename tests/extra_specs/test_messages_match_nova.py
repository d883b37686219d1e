"""Every kind of refusal, and the acceptances that surprise, with Nova 34.0.0's exact text.

The expected messages were produced by Nova 34.0.0 itself (the oracle), not derived from our code.
"""

from __future__ import annotations

import pytest

from openkeel_compute.extra_specs import InvalidExtraSpec, validate

PATTERN_REFUSALS = [
    ("hw:mem_page_size", "huge",
     r"Validation failed; 'huge' is not of the format '(large|small|any|\d+([kKMGT]i?)?(b|bit|B)?)'."),
    # Nova spells the realtime mask pattern with '(\^)?' and the others with '\^?': both show verbatim.
    ("hw:cpu_realtime_mask", "x",
     r"Validation failed; 'x' is not of the format '(\^)?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*'."),
    ("hw:cpu_dedicated_mask", "x",
     r"Validation failed; 'x' is not of the format '\^?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*'."),
    ("hw:numa_cpus.0", "1-",
     r"Validation failed; '1-' is not of the format '\^?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*'."),
    ("pci_passthrough:alias", "a",
     r"Validation failed; 'a' is not of the format '[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*'."),
    ("hw:pmem", "a,,b", r"Validation failed; 'a,,b' is not of the format '([a-zA-Z0-9_]+(,)?)+'."),
]

ENUM_REFUSALS = [
    ("hw:cpu_policy", "bogus", "Validation failed; 'bogus' is not one of: dedicated, shared, mixed."),
    ("group_policy", "ISOLATE", "Validation failed; 'ISOLATE' is not one of: isolate, none."),
    ("trait:HW_CPU_X86_AVX2", "yes", "Validation failed; 'yes' is not one of: required, forbidden."),
    ("os:secure_boot", "Required", "Validation failed; 'Required' is not one of: disabled, required."),
    ("hw:tpm_version", "2", "Validation failed; '2' is not one of: 1.2, 2.0."),
]

INTEGER_REFUSALS = [
    ("hw:numa_nodes", "x", "Validation failed; 'x' is not a valid integer value."),
    ("hw:numa_nodes", "1.5", "Validation failed; '1.5' is not a valid integer value."),
    ("hw:numa_nodes", "", "Validation failed; '' is not a valid integer value."),
    ("resources:VCPU", "abc", "Validation failed; 'abc' is not a valid integer value."),
    ("resources1:CUSTOM_GPU", "x", "Validation failed; 'x' is not a valid integer value."),
]

BOUND_REFUSALS = [
    ("hw:redirected_usb_ports", "16", "Validation failed; '16' is greater than the max value of '15'."),
    ("hw:numa_nodes", "0", "Validation failed; '0' is less than the min value of '1'."),
    ("hw_rng:rate_bytes", "-1", "Validation failed; '-1' is less than the min value of '0'."),
    # the bound messages show the parsed number, not the text that was sent
    ("hw:numa_nodes", " 00 ", "Validation failed; '0' is less than the min value of '1'."),
    ("hw:redirected_usb_ports", "+0016", "Validation failed; '16' is greater than the max value of '15'."),
]

BOOLEAN_REFUSALS = [
    ("hw:boot_menu", "tru", "Validation failed; 'tru' is not a valid boolean-like value."),
    ("hide_hypervisor_id", "2", "Validation failed; '2' is not a valid boolean-like value."),
]

UNKNOWN_KEY_REFUSALS = [
    ("hw:bogus_key", "x",
     "Validation failed; extra spec 'hw:bogus_key' does not appear to be a valid extra spec."),
    ("trait1:lowercase", "required",
     "Validation failed; extra spec 'trait1:lowercase' does not appear to be a valid extra spec."),
    ("resources_1:FOO", "1",
     "Validation failed; extra spec 'resources_1:FOO' does not appear to be a valid extra spec."),
    ("trait:CUSTOM_", "required",
     "Validation failed; extra spec 'trait:CUSTOM_' does not appear to be a valid extra spec."),
    ("capabilities:cpu_info.x", "1",
     "Validation failed; extra spec 'capabilities:cpu_info.x' does not appear to be a valid extra spec."),
    # the API's key schema lets one trailing newline through ('$'), and then the key is unknown
    ("hw:cpu_policy\n", "shared",
     "Validation failed; extra spec 'hw:cpu_policy\n' does not appear to be a valid extra spec."),
]

# A key spelled like a template is found by exact name and then fails its own name regex. The API's
# key schema forbids braces, so only direct callers of validate() can see this message.
TEMPLATE_NAME_REFUSALS = [
    ("hw:numa_cpus.{num}", "0",
     "Validation failed; expected a name of format 'hw:numa_cpus.{num}' but got 'hw:numa_cpus.{num}'."),
    ("trait{group}:COMPUTE_NODE", "required",
     ("Validation failed; expected a name of format 'trait{group}:COMPUTE_NODE' "
     "but got 'trait{group}:COMPUTE_NODE'.")),
    ("capabilities:cpu_info{filter}", "x",
     ("Validation failed; expected a name of format 'capabilities:cpu_info{filter}' "
     "but got 'capabilities:cpu_info{filter}'.")),
]

ACCEPTED = [
    ("hw:boot_menu", " YES "),  # booleans ignore case and surrounding whitespace
    ("hw:numa_mem.1", "\u0663"),  # Python's int() reads any Unicode decimal digit
    ("quota:cpu_quota", "-5"),  # no minimum on this one
    ("group_policy", "isolate"),
    ("aggregate_instance_extra_specs:{key}", "x"),  # '.+' matches the braces too
    ("openkeel:foo", "x"),  # namespace nobody polices
    ("HW:cpu_policy", "x"),  # namespaces are case-sensitive
    ("foo", "x"),  # no namespace at all
    ("hw:numa_cpus_1", "0-1"),  # Nova's '.' in 'hw:numa_cpus.{num}' is an unescaped regex dot
    ("resources.1:VCPU", "x"),  # '.' is not a group character, so not the resources namespace
    (":x", "y"),
]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    PATTERN_REFUSALS + ENUM_REFUSALS + INTEGER_REFUSALS + BOUND_REFUSALS + BOOLEAN_REFUSALS
    + UNKNOWN_KEY_REFUSALS + TEMPLATE_NAME_REFUSALS,
)
def test_refusal_carries_novas_exact_message(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidExtraSpec) as refusal:
        validate(key, value)
    assert refusal.value.message == message, f"{key}={value!r}: message differs from Nova's"
    assert str(refusal.value) == message


@pytest.mark.parametrize(("key", "value"), ACCEPTED)
def test_nova_accepts_these_so_we_do_too(key: str, value: str) -> None:
    validate(key, value)
