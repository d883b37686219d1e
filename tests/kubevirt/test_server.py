"""A server composed into KubeVirt objects: the VM, its Secrets, its own instancetype and preference
(kubevirt/server.py)."""

from __future__ import annotations

import base64
import email
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings

from openkeel_compute.kubevirt.admission import admission_refusals
from openkeel_compute.kubevirt.flavor import parse_flavor
from openkeel_compute.kubevirt.guard import instancetype_conflicts
from openkeel_compute.kubevirt.image import ImageRefused
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import (
    EMPTY_USER_DATA,
    ServerOptions,
    compose,
    flavor_from_copy,
    guest_hostname,
    mac_address,
    root_disk_gib,
    shutdown_grace,
    user_data,
)
from tests.kubevirt.objects import IMAGE, PROJECT, SERVER, flavor_copy
from tests.kubevirt.strategies import PROPERTY_OPTIONS, flavors, images, random_flavor, random_image

UUID = "1B4C2A3E-0000-4000-8000-00000000ABCD"
LOWER = UUID.lower()
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _secret(objects, suffix):
    found = [s for s in objects.secrets if s["metadata"]["name"] == f"{LOWER}-{suffix}"]
    assert len(found) == 1, [s["metadata"]["name"] for s in objects.secrets]
    return found[0]


def _volume(vm, name):
    return next(v for v in vm["spec"]["template"]["spec"]["volumes"] if v["name"] == name)


def test_vm_names_labels_and_strategy():
    objects = compose(SERVER, flavor_copy(), IMAGE, None)
    vm = objects.vm
    assert vm["apiVersion"] == "kubevirt.io/v1" and vm["kind"] == "VirtualMachine"
    assert vm["metadata"]["name"] == LOWER and vm["metadata"]["namespace"] == PROJECT == objects.namespace
    labels = {"app.kubernetes.io/managed-by": "openkeel", "openkeel.io/server-id": LOWER,
              "openkeel.io/project-id": PROJECT}
    assert vm["metadata"]["labels"] == labels
    assert vm["spec"]["template"]["metadata"]["labels"] == labels  # the VMI's labels come from the template
    assert vm["spec"]["dataVolumeTemplates"][0]["metadata"]["labels"] == labels
    assert all(s["metadata"]["labels"] == labels and s["metadata"]["namespace"] == PROJECT for s in objects.secrets)
    assert vm["spec"]["runStrategy"] == "Manual" and "running" not in vm["spec"]
    tspec = vm["spec"]["template"]["spec"]
    assert tspec["domain"]["firmware"] == {"uuid": LOWER}
    assert tspec["hostname"] == "web-1"
    assert tspec["terminationGracePeriodSeconds"] == 60
    assert tspec["networks"] == [{"name": "default", "pod": {}}]
    assert tspec["domain"]["devices"]["interfaces"] == [
        {"name": "default", "masquerade": {}, "macAddress": mac_address(LOWER)}]
    assert vm["metadata"]["annotations"]["openkeel.io/display-name"] == "Web 1"
    assert vm["metadata"]["annotations"]["openkeel.io/server-metadata"] == '{"role":"web"}'
    assert objects.documents()[-1] is vm  # what the VM refers to is applied first


@pytest.mark.parametrize("is_public", [True, False])
def test_the_server_has_its_own_instancetype_and_preference_whatever_the_flavors_access(is_public):
    """The VM names copies of its flavor's instancetype and preference in its own namespace, labelled with
    the server: never the catalogue's objects, which may not be synced yet, or not be in this namespace
    (an administrator's boot of a private flavor the project has no access to)."""
    flavor = flavor_copy(is_public=is_public)
    objects = compose(SERVER, flavor, IMAGE, None)
    catalogue = flavor_to_kubevirt(flavor_from_copy(flavor, PROJECT))
    labels = {"app.kubernetes.io/managed-by": "openkeel", "openkeel.io/server-id": LOWER,
              "openkeel.io/project-id": PROJECT}
    for body, kind, wanted in ((objects.instancetype, "VirtualMachineInstancetype", catalogue.instancetypes),
                               (objects.preference, "VirtualMachinePreference", catalogue.preferences)):
        assert body["kind"] == kind and body["apiVersion"] == "instancetype.kubevirt.io/v1beta1"
        assert body["metadata"]["namespace"] == PROJECT and body["metadata"]["labels"] == labels
        assert re.fullmatch(LOWER + r"-[0-9a-f]{10}", body["metadata"]["name"])
        assert body["spec"] == wanted[0]["spec"]  # the flavor's, as the catalogue's copy has it
        assert objects.vm["spec"][kind.removeprefix("VirtualMachine").lower()] == {
            "kind": kind, "name": body["metadata"]["name"]}
    docs = objects.documents()
    assert docs.index(objects.instancetype) < docs.index(objects.vm) and docs.index(objects.preference) < docs.index(
        objects.vm)


def test_a_new_size_or_image_is_a_new_name_the_same_keeps_it():
    """KubeVirt never reads an object again under a name it froze: a new spec must come under a new name."""
    plain = compose(SERVER, flavor_copy(), IMAGE, None)
    assert compose(SERVER, flavor_copy(), IMAGE, None).vm["spec"]["instancetype"] == plain.vm["spec"]["instancetype"]
    bigger = compose(SERVER, flavor_copy(memory_mb=4096), IMAGE, None)
    assert bigger.instancetype["metadata"]["name"] != plain.instancetype["metadata"]["name"]
    assert bigger.preference["metadata"]["name"] == plain.preference["metadata"]["name"]
    uefi = compose(SERVER, flavor_copy(), {**IMAGE, "properties": {"hw_firmware_type": "uefi"}}, None)
    assert uefi.preference["metadata"]["name"] != plain.preference["metadata"]["name"]
    assert uefi.instancetype["metadata"]["name"] == plain.instancetype["metadata"]["name"]


def test_owned_by_the_vm_once_it_exists():
    objects = compose(SERVER, flavor_copy(), IMAGE, None)
    assert objects.owned_by(None) is objects
    owned = objects.owned_by({"metadata": {"name": LOWER, "uid": "vm-uid"}})
    ref = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": LOWER, "uid": "vm-uid",
           "controller": False, "blockOwnerDeletion": False}
    assert [b["metadata"]["ownerReferences"] for b in owned.sizing] == [[ref], [ref]]
    assert "ownerReferences" not in objects.instancetype["metadata"]  # the original is left as it was


def test_no_domain_sizing_beside_the_instancetype():
    flavor = flavor_copy(extra_specs={"hw:cpu_policy": "dedicated", "hw:mem_page_size": "large",
                                "hw:cpu_sockets": "2", "quota:cpu_quota": "10000"})
    objects = compose(SERVER, flavor, IMAGE, None)
    domain = objects.vm["spec"]["template"]["spec"]["domain"]
    assert not {"cpu", "memory", "resources"} & domain.keys()
    it = flavor_to_kubevirt(flavor_from_copy(flavor, PROJECT)).instancetypes[0]["spec"]
    assert instancetype_conflicts(objects.vm, it) == []


def test_root_disk_imports_from_glance_with_the_header_secret():
    objects = compose(SERVER, flavor_copy(), IMAGE, None, ServerOptions(image_endpoint="https://glance.example:9292/",
                                                                 storage_class="fast"), image_token="svc-token")
    dvt = objects.vm["spec"]["dataVolumeTemplates"][0]
    assert dvt["metadata"]["name"] == f"{LOWER}-root"
    assert dvt["spec"]["source"]["http"] == {
        "url": f"https://glance.example:9292/v2/images/{IMAGE['id']}/file",
        "secretExtraHeaders": [f"{LOWER}-image-token"]}
    assert dvt["spec"]["storage"] == {"resources": {"requests": {"storage": "20Gi"}}, "storageClassName": "fast"}
    assert _volume(objects.vm, "root") == {"name": "root", "dataVolume": {"name": f"{LOWER}-root"}}
    header = base64.b64decode(_secret(objects, "image-token")["data"]["header"]).decode()
    assert header == "X-Auth-Token:svc-token"
    # without a token (no image service credential) there is no Secret and the import names none:
    # CDI's importer would wait for ever for a Secret that never comes
    tokenless = compose(SERVER, flavor_copy(), IMAGE, None)
    assert all(not s["metadata"]["name"].endswith("image-token") for s in tokenless.secrets)
    assert tokenless.vm["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["http"] == {
        "url": f"http://127.0.0.1:9292/v2/images/{IMAGE['id']}/file"}


@pytest.mark.parametrize(("image", "gib"), [
    ({"virtual_size": 117440512, "size": 5}, 1), ({"virtual_size": 3 * 1024**3 + 1}, 4),
    ({"virtual_size": None, "size": 2 * 1024**3}, 2), ({"min_disk": 5}, 5)])
def test_zero_disk_flavor_takes_the_image_size(image, gib):
    flavor = flavor_from_copy(flavor_copy(root_gb=0), PROJECT)
    assert root_disk_gib(flavor, image) == gib
    objects = compose(SERVER, flavor_copy(root_gb=0), {**IMAGE, "virtual_size": None, "size": None, **image}, None)
    assert objects.vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["resources"]["requests"] == {
        "storage": f"{gib}Gi"}


def test_zero_disk_flavor_and_an_image_without_size_is_refused():
    with pytest.raises(ValueError, match="no size"):
        root_disk_gib(flavor_from_copy(flavor_copy(root_gb=0), PROJECT), {"id": "x"})


def test_ephemeral_and_swap_disks_follow_the_flavor_fragment():
    objects = compose(SERVER, flavor_copy(ephemeral_gb=3, swap=512), IMAGE, None)
    assert _volume(objects.vm, "ephemeral0") == {"name": "ephemeral0", "emptyDisk": {"capacity": "3Gi"}}
    assert _volume(objects.vm, "swap") == {"name": "swap", "emptyDisk": {"capacity": "512Mi"}}
    names = [d["name"] for d in objects.vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"]]
    assert names == ["root", "ephemeral0", "swap", "cloudinitdisk"]
    # the swap lines travel in the user-data Secret, never inline
    data = base64.b64decode(_secret(objects, "user-data")["data"]["userdata"])
    assert b"mkswap" in data and b"swapon" in data
    assert "userData" not in str(objects.vm)


def test_user_data_in_a_secret_and_swap_merged_as_multipart():
    script = b"#!/bin/sh\necho hello\n"
    server = {**SERVER, "user_data": base64.b64encode(script).decode()}
    objects = compose(server, flavor_copy(), IMAGE, None)
    assert _volume(objects.vm, "cloudinitdisk") == {
        "name": "cloudinitdisk", "cloudInitNoCloud": {"secretRef": {"name": f"{LOWER}-user-data"}}}
    assert base64.b64decode(_secret(objects, "user-data")["data"]["userdata"]) == script
    merged = user_data(server["user_data"], swap=True)
    message = email.message_from_bytes(merged)
    parts = [(p.get_content_type(), p.get_payload(decode=True)) for p in message.walk() if not p.is_multipart()]
    assert parts[0][0] == "text/cloud-config" and b"mkswap" in parts[0][1]
    assert parts[1] == ("text/x-shellscript", script)


def test_no_user_data_still_gives_cloud_init_something_to_read():
    objects = compose(SERVER, flavor_copy(), IMAGE, None)
    assert base64.b64decode(_secret(objects, "user-data")["data"]["userdata"]) == EMPTY_USER_DATA


@pytest.mark.parametrize(("config_drive", "force", "source", "propagation"), [
    ("", False, "cloudInitNoCloud", "noCloud"), (None, False, "cloudInitNoCloud", "noCloud"),
    ("True", False, "cloudInitConfigDrive", "configDrive"), ("", True, "cloudInitConfigDrive", "configDrive")])
def test_config_drive_when_asked_or_forced(config_drive, force, source, propagation):
    objects = compose({**SERVER, "config_drive": config_drive}, flavor_copy(), IMAGE, "ssh-ed25519 AAAAC3 me@host",
                      ServerOptions(force_config_drive=force))
    assert source in _volume(objects.vm, "cloudinitdisk")
    creds = objects.vm["spec"]["template"]["spec"]["accessCredentials"]
    assert creds == [{"sshPublicKey": {"source": {"secret": {"secretName": f"{LOWER}-ssh-key"}},
                                       "propagationMethod": {propagation: {}}}}]
    assert base64.b64decode(_secret(objects, "ssh-key")["data"]["key"]) == b"ssh-ed25519 AAAAC3 me@host"


@pytest.mark.parametrize("config_drive", ["True", ""])
def test_a_config_drive_carries_the_ports_network_data_json_and_nocloud_their_v2_config(config_drive):
    from openkeel_compute.kubevirt.netdata import network_config, network_data

    ports = [{"port_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "mac": "fa:16:3e:00:00:01", "network_id": "net-1",
              "fixed_ips": ["10.0.0.5"], "subnets": [{"ip_address": "10.0.0.5", "cidr": "10.0.0.0/24",
                                                      "gateway_ip": "10.0.0.1", "dns_nameservers": [],
                                                      "host_routes": []}]}]
    objects = compose({**SERVER, "config_drive": config_drive}, flavor_copy(), IMAGE, None, ports=ports)
    data = {k: base64.b64decode(v) for k, v in _secret(objects, "user-data")["data"].items()}
    wanted = network_data(ports)
    assert wanted is not None and wanted["links"][0]["id"] == "tap0f1e2d3c-4b"
    assert json.loads(data["networkdata"]) == (wanted if config_drive else network_config(wanted))
    ports_without_subnets = [{k: v for k, v in ports[0].items() if k != "subnets"}]
    bare = compose({**SERVER, "config_drive": config_drive}, flavor_copy(), IMAGE, None, ports=ports_without_subnets)
    assert set(_secret(bare, "user-data")["data"]) == {"userdata"}  # nothing to configure: no network data


def test_without_key_pair_no_credentials():
    objects = compose(SERVER, flavor_copy(), IMAGE, None)
    assert "accessCredentials" not in objects.vm["spec"]["template"]["spec"]
    assert [s["metadata"]["name"] for s in objects.secrets] == [f"{LOWER}-user-data"]


def test_the_servers_preference_carries_the_images_properties():
    plain = compose(SERVER, flavor_copy(), IMAGE, None)
    assert plain.preference["spec"] == flavor_to_kubevirt(flavor_from_copy(flavor_copy(), PROJECT)).preferences[0][
        "spec"]
    uefi = compose(SERVER, flavor_copy(), {**IMAGE, "properties": {"hw_firmware_type": "uefi", "hw_disk_bus": "scsi"}}, None)
    assert uefi.preference["kind"] == "VirtualMachinePreference"
    assert uefi.preference["metadata"]["namespace"] == PROJECT
    assert uefi.preference["spec"]["firmware"] == {"preferredEfi": {"secureBoot": False}}
    assert uefi.preference["spec"]["devices"]["preferredDiskBus"] == "scsi"
    assert uefi.vm["spec"]["preference"] == {"kind": "VirtualMachinePreference",
                                             "name": uefi.preference["metadata"]["name"]}


def test_image_refusals_propagate():
    with pytest.raises(ImageRefused, match="memory is too small"):
        compose(SERVER, flavor_copy(), {**IMAGE, "min_ram": 4096}, None)


def test_image_shutdown_timeout_sets_the_grace_period():
    objects = compose(SERVER, flavor_copy(), {**IMAGE, "properties": {"os_shutdown_timeout": "15"}}, None)
    assert objects.vm["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 15
    objects = compose(SERVER, flavor_copy(), IMAGE, None, ServerOptions(shutdown_timeout=5))
    assert objects.vm["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 5


@pytest.mark.parametrize(("hostname", "expected"), [
    ("web-1", "web-1"), ("web-1.example.org", "web-1"), ("", None), (None, None), ("-x", None),
    ("a" * 70, "a" * 63)])
def test_guest_hostname(hostname, expected):
    assert guest_hostname(hostname) == expected


def test_server_names_need_a_uuid():
    assert server_vm_name(UUID) == LOWER
    with pytest.raises(ValueError):
        server_vm_name("not-a-uuid")


def _secret_errors(secret):
    errors = []
    meta = secret["metadata"]
    if len(meta["name"]) > 253 or not _SUBDOMAIN.fullmatch(meta["name"]):
        errors.append(f"bad name {meta['name']}")
    for key, value in secret["data"].items():
        if not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
            errors.append(f"bad key {key}")
        base64.b64decode(value, validate=True)
    if sum(len(base64.b64decode(v)) for v in secret["data"].values()) > 1024 * 1024:
        errors.append("over 1 MiB")
    return errors


def test_composed_objects_pass_the_strict_schema(strict_errors):
    server = {**SERVER, "user_data": base64.b64encode(b"#cloud-config\n{}\n").decode(), "config_drive": "True"}
    objects = compose(server, flavor_copy(ephemeral_gb=1, swap=128, is_public=False),
                      {**IMAGE, "properties": {"hw_firmware_type": "uefi"}}, "ssh-rsa AAAA", image_token="t")
    for doc in objects.documents():
        if doc["kind"] == "Secret":
            assert _secret_errors(doc) == []
        else:
            assert strict_errors(doc) == []


def _generated_servers():
    """Servers composed from random flavors and images (the flavor suite's generators), with their flavor objects."""
    rng = random.Random(20261201)
    for _ in range(300):
        flavor = parse_flavor(random_flavor(rng))
        image = {**random_image(rng), "virtual_size": rng.choice([None, 10**6, 10**10]), "size": 10**8,
                 "id": "70a599e0-31e7-49b7-b260-868f441e862b"}
        server = {**SERVER, "config_drive": rng.choice(["", "True"]),
                  "user_data": rng.choice([None, base64.b64encode(b"#!/bin/sh\ntrue\n").decode()]),
                  "hostname": rng.choice(["a", "Web.Example", "x" * 80, None])}
        try:
            objects = compose(server, flavor, image, rng.choice([None, "ssh-ed25519 AAAA"]),
                              ServerOptions(mapping=PROPERTY_OPTIONS))
        except ImageRefused:
            continue
        yield objects, flavor_to_kubevirt(flavor_from_copy(flavor, PROJECT), PROPERTY_OPTIONS)


def test_generated_servers_pass_admission():
    composed = 0
    for objects, project_copy in _generated_servers():
        composed += 1
        it = project_copy.instancetypes[0]
        pref = objects.preference
        assert instancetype_conflicts(objects.vm, it["spec"]) == []
        assert admission_refusals(it["spec"], pref["spec"], objects.vm,
                                  [it["metadata"], pref["metadata"], objects.vm["metadata"]]) == []
        assert all(_secret_errors(doc) == [] for doc in objects.secrets)
    assert composed > 150


def test_generated_servers_pass_the_strict_schema(strict_errors):
    for objects, _ in _generated_servers():
        for doc in objects.documents():
            if doc["kind"] != "Secret":
                assert strict_errors(doc) == [], doc["kind"]


def test_a_users_mime_archive_keeps_its_parts_beside_the_swap_part():
    theirs = email.message_from_string(
        'Content-Type: multipart/mixed; boundary="b"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/x-shellscript\n\n'
        "#!/bin/sh\necho one\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: [ls]\n--b--\n")
    merged = email.message_from_bytes(user_data(base64.b64encode(theirs.as_bytes()).decode(), swap=True))
    types = [p.get_content_type() for p in merged.walk() if not p.is_multipart()]
    assert types == ["text/cloud-config", "text/x-shellscript", "text/cloud-config"]


@pytest.mark.parametrize(("value", "seconds"), [("15", 15), (" 0 ", 0), ("soon", 60), ("-3", 60), (None, 60)])
def test_shutdown_grace_tolerates_odd_image_values(value, seconds):
    properties = {} if value is None else {"os_shutdown_timeout": value}
    assert shutdown_grace({"properties": properties}, ServerOptions()) == seconds


@given(flavors(), images())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_servers_pass_admission(flavor, image):
    parsed = parse_flavor(flavor)
    image = {**image, "id": "70a599e0-31e7-49b7-b260-868f441e862b", "virtual_size": 10**9}
    try:
        objects = compose(SERVER, parsed, image, "ssh-ed25519 AAAA", ServerOptions(mapping=PROPERTY_OPTIONS))
    except ImageRefused:
        return
    project_copy = flavor_to_kubevirt(flavor_from_copy(parsed, PROJECT), PROPERTY_OPTIONS)
    it = project_copy.instancetypes[0]
    pref = objects.preference
    assert instancetype_conflicts(objects.vm, it["spec"]) == []
    assert admission_refusals(it["spec"], pref["spec"], objects.vm, [it["metadata"], objects.vm["metadata"]]) == []


def test_the_package_exports_compose_and_observe():
    import openkeel_compute.kubevirt as package
    from openkeel_compute.kubevirt.vmstatus import observe

    assert package.compose is compose and package.observe is observe
    assert {"compose", "observe", "ServerOptions", "Observation", "Fault", "ServerObjects"} <= set(package.__all__)


@pytest.mark.parametrize(("ports", "attach"), [(None, None), ("1", True), ("0", False)])
def test_the_serial_console_is_logged_and_the_flavor_says_whether_there_is_one(ports, attach):
    flavor = flavor_copy(extra_specs={"hw:serial_port_count": ports} if ports else {})
    objects = compose(SERVER, flavor, IMAGE, None)
    devices = objects.vm["spec"]["template"]["spec"]["domain"]["devices"]
    assert devices["logSerialConsole"] is True and "autoattachSerialConsole" not in devices
    preference = flavor_to_kubevirt(flavor_from_copy(flavor, PROJECT)).preferences[0]["spec"]
    assert (preference.get("devices") or {}).get("preferredAutoattachSerialConsole") == attach
