"""The rules of Nova's scheduler filters that read aggregates, instances and the request (compute/filter_rules.py),
each against the cases Nova 34.0.0's filters decide."""

from __future__ import annotations

import logging

import pytest

from openkeel_compute.compute import filter_rules as rules
from openkeel_compute.compute.host_filters import FilterOptions, without_effect


@pytest.mark.parametrize(("value", "requirement", "matches"), [
    ("4", "4", True), ("4", "5", False), (None, "4", False),
    ("4", "= 2", True), ("4", "= 4", True), ("4", "= 5", False),  # "=": at least
    ("4.0", "== 4", True), ("4", "== 5", False), ("4", "!= 5", True), ("4", "!= 4", False),
    ("4", ">= 4", True), ("3", ">= 4", False), ("3", "<= 4", True), ("5", "<= 4", False),
    ("ssd", "s== ssd", True), ("hdd", "s== ssd", False), ("a", "s!= b", True), ("b", "s!= b", False),
    ("abc", "s< abd", True), ("abc", "s<= abc", True), ("b", "s> a", True), ("a", "s>= b", False),
    ("gpu,fast", "<in> fast", True), ("gpu", "<in> fast", False),
    ("avx avx2 sse", "<all-in> avx sse", True), ("avx sse", "<all-in> avx2", False),
    ("x", "<or> x <or> y", True), ("y", "<or> x <or> y", True), ("z", "<or> x <or> y", False),
    ("fast", ">= 4", False),  # a word compared as a number matches nothing
    ("4", ">=", False),  # an operator without its operand
    ("foo bar", "foo bar", True),  # several words, no operator: the value itself
])
def test_extra_specs_operators(value, requirement, matches):
    assert rules.spec_matches(value, requirement) is matches


def test_instance_extra_specs_read_unscoped_and_their_own_scope_only():
    ssd = [{"disk": "ssd", "cpu": "fast, slow"}]
    assert rules.instance_extra_specs_pass(ssd, {})  # a flavor without extra specs goes anywhere
    assert rules.instance_extra_specs_pass([], {"hw:cpu_policy": "dedicated", "resources:VCPU": "2"})
    assert rules.instance_extra_specs_pass(ssd, {"aggregate_instance_extra_specs:disk": "ssd"})
    assert rules.instance_extra_specs_pass(ssd, {"disk": "s== ssd"})
    assert not rules.instance_extra_specs_pass(ssd, {"aggregate_instance_extra_specs:disk": "hdd"})
    assert not rules.instance_extra_specs_pass([], {"disk": "ssd"})  # not in any aggregate: refused
    assert not rules.instance_extra_specs_pass(ssd, {"gpu": "true"})  # a key the aggregates lack
    # values are split at commas and stripped; those of all the host's aggregates count
    assert rules.instance_extra_specs_pass(ssd, {"cpu": "slow"})
    assert rules.instance_extra_specs_pass([{"disk": "hdd"}, {"disk": "nvme"}], {"disk": "nvme"})
    # every spec must match, not one
    assert not rules.instance_extra_specs_pass(ssd, {"disk": "ssd", "cpu": "medium"})


def test_tenant_isolation():
    assert rules.tenant_passes([], "p1")
    assert rules.tenant_passes([{"disk": "ssd"}], "p1")  # no filter_tenant_id: anyone
    assert rules.tenant_passes([{"filter_tenant_id": "p1,p2"}], "p2")
    assert not rules.tenant_passes([{"filter_tenant_id": "p1,p2"}], "p3")
    # every key prefixed so, of every aggregate of the host, together
    both = [{"filter_tenant_id1": "p1"}, {"filter_tenant_id_more": " p3 "}]
    assert rules.tenant_passes(both, "p3") and rules.tenant_passes(both, "p1")
    assert not rules.tenant_passes(both, "p2")


@pytest.mark.parametrize(("restrict", "image", "host", "passes"), [
    (True, "iso", "iso-host", True), (True, "iso", "other", False),
    (True, "plain", "iso-host", False), (True, "plain", "other", True),
    (True, None, "iso-host", False), (True, None, "other", True),  # a volume-backed server is not isolated
    (False, "iso", "iso-host", True), (False, "iso", "other", False),
    (False, "plain", "iso-host", True), (False, "plain", "other", True),
])
def test_isolated_hosts(restrict, image, host, passes):
    assert rules.isolated_passes(host, image, ["iso"], ["iso-host"], restrict) is passes


def test_isolated_hosts_without_isolated_images():
    assert not rules.isolated_passes("iso-host", "any", [], ["iso-host"], True)  # restricted: none at all
    assert rules.isolated_passes("other", "any", [], ["iso-host"], True)
    assert rules.isolated_passes("iso-host", "any", [], ["iso-host"], False)


def test_aggregate_max_instances(caplog):
    assert rules.max_instances([], 50) == 50
    assert rules.max_instances([{"max_instances_per_host": "3"}, {"max_instances_per_host": "5"}], 50) == 3
    assert rules.max_instances([{"other": "1"}], 7) == 7
    with caplog.at_level(logging.WARNING):
        assert rules.max_instances([{"max_instances_per_host": "many"}], 7) == 7
    assert "Could not decode max_instances_per_host" in caplog.text


def test_image_properties_isolation():
    windows = [{"os_type": "windows", "disk": "ssd"}]
    assert rules.image_properties_pass(windows, {"os_type": "windows"}, None, ".")
    assert not rules.image_properties_pass(windows, {"os_type": "linux"}, None, ".")
    assert rules.image_properties_pass(windows, {}, None, ".")  # an image without the property goes anywhere
    assert rules.image_properties_pass([{"os_type": "windows,linux"}], {"os_type": "linux"}, None, ".")
    # only Nova's image properties are compared: an arbitrary key neither refuses nor admits
    assert rules.image_properties_pass([{"my_prop": "a"}], {"my_prop": "b"}, None, ".")
    # legacy names are read as the property they stand for; booleans and architectures as Nova holds them
    assert not rules.image_properties_pass([{"hw_architecture": "aarch64"}], {"architecture": "x86_64"}, None, ".")
    assert rules.image_properties_pass([{"hw_architecture": "x86_64"}], {"architecture": "X86_64"}, None, ".")
    assert rules.image_properties_pass([{"hw_pmu": "True"}], {"hw_pmu": "yes"}, None, ".")
    assert rules.image_properties_pass([{"hw_pmu": "True"}], {"hw_pmu": "false"}, None, ".")  # False: not set
    # with a namespace only the keys under it count
    assert rules.image_properties_pass(windows, {"os_type": "linux"}, "hw", "_")
    assert not rules.image_properties_pass([{"hw_disk_bus": "scsi"}], {"hw_disk_bus": "virtio"}, "hw", "_")


def test_filters_without_effect():
    assert without_effect(["ComputeFilter", "ImagePropertiesFilter", "ComputeCapabilitiesFilter",
                           "ServerGroupAffinityFilter", "ServerGroupAntiAffinityFilter", "SameHostFilter",
                           "AggregateInstanceExtraSpecsFilter", "NUMATopologyFilter", "IoOpsFilter",
                           "NumInstancesFilter"]) == ["NUMATopologyFilter", "IoOpsFilter"]
    assert FilterOptions().max_instances_per_host == 50


def test_hints_read_as_novas_request_spec():
    assert rules.hint({"cidr": ["/16"]}, "cidr") == "/16"
    assert rules.hint({"x": ["a", "b"]}, "x") == ["a", "b"]
    assert rules.hint({}, "cidr", "/24") == "/24"


@pytest.mark.parametrize(("host_ip", "near", "cidr", "passes"), [
    ("10.0.0.7", None, "/24", True),  # no hint: any host
    ("10.0.0.7", "10.0.0.1", "/24", True), ("10.0.1.7", "10.0.0.1", "/24", False),
    ("10.0.1.7", "10.0.0.1", "/16", True), ("10.0.1.7", "10.0.0.1", "/255.255.0.0", True),
    ("10.0.0.7", "10.0.0.7", "/32", True), ("10.0.0.8", "10.0.0.7", "/32", False),
    ("fd00::5", "fd00::1", "/64", True), ("fd01::5", "fd00::1", "/64", False),
    (None, "10.0.0.1", "/24", False),  # a host without a known address
    ("10.0.0.7", ["10.0.0.1", "10.0.0.2"], "/24", False),
])
def test_simple_cidr_affinity(host_ip, near, cidr, passes):
    assert rules.cidr_passes(host_ip, near, cidr) is passes


HOST = {"host": "node-1", "free_ram_mb": 2048, "vcpus_total": 8, "vcpus_used": 2, "num_instances": 3,
        "stats": {"zone": "a"}}


@pytest.mark.parametrize(("query", "passes"), [
    (None, True), ("", True), ("[]", True),
    ('["=", "$host", "node-1"]', True), ('["=", "$host", "node-2"]', False),
    ('[">=", "$free_ram_mb", 1024]', True), ('[">=", "$free_ram_mb", 1024, 4096]', False),
    ('["<", "$num_instances", 5]', True), ('["<=", "$vcpus_used", 1]', False),
    ('["in", "$host", "node-2", "node-1"]', True), ('["in", "$host", "node-2"]', False),
    ('["not", ["=", "$host", "node-1"]]', False), ('["not", ["=", "$host", "node-2"]]', True),
    ('["and", [">=", "$free_ram_mb", 1024], ["=", "$host", "node-2"]]', False),
    ('["or", [">=", "$free_ram_mb", 4096], ["=", "$host", "node-1"]]', True),
    ('["=", "$stats.zone", "a"]', True), ('["=", "$stats.zone.more", "a"]', False),
    ('["=", "$unknown", "x"]', False),  # unknown left out: one argument compares with nothing
    ('["not", "$unknown"]', False),  # nothing to flip: an empty list, not true
    ('[">=", "$free_ram_mb", "1024"]', False),  # a number against a word
    ('["bogus", 1]', False), ("not json", False),
])
def test_json_filter_queries(query, passes):
    assert rules.json_query_passes(query, HOST) is passes
