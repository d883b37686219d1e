"""The flavor notification payloads Nova 34.0.0 sends, and their comparison."""

from __future__ import annotations

EXPECTED_CREATE_PAYLOAD = {
    "nova_object.name": "FlavorPayload",
    "nova_object.namespace": "nova",
    "nova_object.version": "1.4",
    "nova_object.data": {
        "flavorid": "a22d5517-147c-4147-a0d1-e698df5cd4e3",
        "name": "test_flavor",
        "memory_mb": 1024,
        "vcpus": 2,
        "root_gb": 10,
        "ephemeral_gb": 0,
        "swap": 0,
        "rxtx_factor": 2.0,
        "vcpu_weight": 0,
        "disabled": False,
        "is_public": True,
        "extra_specs": None,
        "projects": [],
        "description": None,
    },
}


EXPECTED_UPDATE_PAYLOAD = {
    "nova_object.name": "FlavorPayload",
    "nova_object.namespace": "nova",
    "nova_object.version": "1.4",
    "nova_object.data": {
        "flavorid": "a22d5517-147c-4147-a0d1-e698df5cd4e3",
        "name": "test_flavor",
        "memory_mb": 1024,
        "vcpus": 2,
        "root_gb": 10,
        "ephemeral_gb": 0,
        "swap": 0,
        "rxtx_factor": 2.0,
        "vcpu_weight": 0,
        "disabled": False,
        "is_public": False,
        "extra_specs": {"hw:numa_nodes": "2"},
        "projects": ["fake_tenant"],
        "description": None,
    },
}


EXPECTED_DELETE_PAYLOAD = {
    "nova_object.name": "FlavorPayload",
    "nova_object.namespace": "nova",
    "nova_object.version": "1.4",
    "nova_object.data": {
        "flavorid": "a22d5517-147c-4147-a0d1-e698df5cd4e3",
        "name": "test_flavor",
        "memory_mb": 1024,
        "vcpus": 2,
        "root_gb": 10,
        "ephemeral_gb": 0,
        "swap": 0,
        "rxtx_factor": 2.0,
        "vcpu_weight": 0,
        "disabled": False,
        "is_public": True,
        "extra_specs": None,
        "projects": None,
        "description": None,
    },
}


def assert_same_payload(actual: dict, expected: dict) -> None:
    """Compare envelope and data key by key so a failure names the field that differs."""
    assert set(actual) == set(expected), f"envelope keys differ: {sorted(actual)} != {sorted(expected)}"
    for key, value in expected.items():
        if key != "nova_object.data":
            assert actual[key] == value, f"{key}: {actual[key]!r} != {value!r}"
    data, expected_data = actual["nova_object.data"], expected["nova_object.data"]
    assert set(data) == set(expected_data), f"data fields differ: {sorted(data)} != {sorted(expected_data)}"
    for field, value in expected_data.items():
        assert data[field] == value, f"{field}: {data[field]!r} != {value!r}"
        assert type(data[field]) is type(value), f"{field}: {type(data[field])} is not {type(value)}"
