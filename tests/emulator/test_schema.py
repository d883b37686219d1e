"""Strict schemas: the packaged schema is KubeVirt's, and the API refuses what KubeVirt's would."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest
from lightkube import ApiError

from openkeel_compute.emulator import schema
from tests._shared import ROOT, shared_path
from tests.emulator.conftest import CIT, NS, VM, instancetype, server_vm


def _tool():
    spec = importlib.util.spec_from_file_location("kubevirt_schema", ROOT / "tools" / "kubevirt_schema.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packaged_schema_is_current():
    """The committed schema is exactly what the tool derives from KubeVirt v1.9.0's swagger.json."""
    tool = _tool()
    swagger = json.loads(shared_path("kubevirt/swagger.json").read_text())
    assert schema.SCHEMA_FILE.read_text() == tool.render(tool.build(swagger)), \
        "run: python tools/kubevirt_schema.py"


def test_every_common_instancetype_and_preference_is_valid():
    """KubeVirt's own bundles pass: the schema refuses nothing KubeVirt ships."""
    import yaml

    bundles = sorted(shared_path("kubevirt/common-instancetypes").rglob("*.yaml"))
    checked = 0
    for path in bundles:
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") not in schema.load()["roots"]:
                continue
            problems = schema.validate(doc, schema.definition_of(doc["kind"]))
            assert not problems, (path.name, doc["metadata"]["name"], problems.unknown, problems.invalid)
            checked += 1
    assert checked >= 50


def test_unknown_fields_found_at_every_depth():
    vm = server_vm()
    vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["bogus"] = 1
    vm["spec"]["instancetype"]["revison"] = "x"
    vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["masquerade"] = {"on": True}
    problems = schema.validate(vm, "v1.VirtualMachine")
    assert sorted(problems.unknown) == [
        "spec.instancetype.revison",
        "spec.template.spec.domain.devices.disks[0].bogus",
        "spec.template.spec.domain.devices.interfaces[0].masquerade.on"]


def test_strict_create_refused_with_the_api_servers_message(cluster, client):
    vm = server_vm()
    vm["spec"]["runStrategy2"] = "Manual"
    vm["spec"]["template"]["spec"]["domain"]["cpuu"] = {}
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace=NS)
    assert caught.value.status.code == 400
    assert caught.value.status.reason == "BadRequest"
    assert caught.value.status.message == (
        'VirtualMachine in version "v1" cannot be handled as a VirtualMachine: strict decoding error: '
        'unknown field "spec.template.spec.domain.cpuu", unknown field "spec.runStrategy2"')  # document order
    assert cluster.get("VirtualMachine", vm["metadata"]["name"], NS) is None


def test_unknown_field_in_instancetype_refused(cluster, client):
    it = instancetype()
    it["spec"]["disk"] = {"size": "1Gi"}
    with pytest.raises(ApiError) as caught:
        client.create(CIT.from_dict(it))
    assert caught.value.status.code == 400
    assert 'unknown field "spec.disk"' in caught.value.status.message


def test_wrong_type_is_invalid(cluster, client):
    it = instancetype()
    it["spec"]["cpu"]["guest"] = "two"
    with pytest.raises(ApiError) as caught:
        client.create(CIT.from_dict(it))
    assert caught.value.status.code == 422
    assert caught.value.status.reason == "Invalid"
    assert ('spec.cpu.guest: Invalid value: "string": spec.cpu.guest in body must be of type integer'
            in caught.value.status.message)


def test_without_strict_unknown_fields_are_dropped_with_a_warning(cluster):
    import httpx2 as httpx

    vm = server_vm()
    vm["spec"]["bogus"] = True
    response = httpx.post(f"{cluster.url}/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines", json=vm)
    assert response.status_code == 201
    assert "bogus" not in response.json()["spec"]
    assert 'unknown field "spec.bogus"' in response.headers["Warning"]


def test_valid_server_vm_accepted_and_status_ignored_on_create(cluster, client):
    vm = copy.deepcopy(server_vm())
    vm["status"] = {"printableStatus": "Running"}
    created = client.create(VM.from_dict(vm), namespace=NS)
    assert created.metadata.uid and created.metadata.generation == 1
    stored = cluster.get("VirtualMachine", vm["metadata"]["name"], NS)
    assert (stored.get("status") or {}).get("printableStatus") != "Running" or stored["status"].get("created")


def test_invalid_name_refused(cluster, client):
    vm = server_vm(name="Not_A_Name")
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace=NS)
    assert caught.value.status.code == 422
    assert 'metadata.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain' in caught.value.status.message


def test_missing_namespace_is_404(cluster, client):
    vm = server_vm()
    vm["metadata"]["namespace"] = "nowhere"
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace="nowhere")
    assert caught.value.status.code == 404
    assert caught.value.status.message == 'namespaces "nowhere" not found'
