"""Shared helpers for the notification tests: configurations and Nova-sample-shaped flavors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from oslo_config import cfg

from openkeel_compute.conf.notifications import register_messaging_opts
from openkeel_compute.notifications import register_opts
from tests.notifications.rabbitmq import broker  # noqa: F401 - the broker fixture, for every module here

# The flavor Nova's notification samples are generated from, as our catalogue hands it over.
SAMPLE_FLAVOR: dict[str, Any] = {
    "flavorid": "a22d5517-147c-4147-a0d1-e698df5cd4e3",
    "name": "test_flavor",
    "memory_mb": 1024,
    "vcpus": 2,
    "root_gb": 10,
    "ephemeral_gb": 0,
    "swap": 0,
    "rxtx_factor": 2.0,
    "vcpu_weight": None,
    "disabled": False,
    "is_public": True,
    "description": None,
    "extra_specs": {},
    "projects": [],
}

SAMPLE_FLAVOR_AFTER_UPDATES: dict[str, Any] = {
    **SAMPLE_FLAVOR,
    "is_public": False,
    "extra_specs": {"hw:numa_nodes": "2"},
    "projects": ["fake_tenant"],
}


@pytest.fixture
def make_conf() -> Callable[..., cfg.ConfigOpts]:
    """Build a parsed ConfigOpts with our options and the given overrides.

    Overrides are ``group__option=value`` keyword arguments (``DEFAULT__`` for [DEFAULT]).
    """

    def build(**overrides: Any) -> cfg.ConfigOpts:
        conf = cfg.ConfigOpts()
        register_opts(conf)
        register_messaging_opts(conf)  # so the tests can override oslo.messaging's options
        conf([], project="openkeel-test")
        for key, value in overrides.items():
            group, name = key.split("__", 1)
            conf.set_override(name, value, group=None if group == "DEFAULT" else group)
        return conf

    return build
