"""The emulated cluster keeps up with a controller booting many servers."""

from __future__ import annotations

import time

from tests.emulator.conftest import CIT, instancetype, preference, server_vm


def test_a_request_does_not_wait_for_a_delayed_ack(cluster, client):
    """Keep-alive requests answer in milliseconds (headers and body leave without Nagle's wait, ~40 ms each)."""
    client.create(CIT.from_dict(instancetype()))
    started = time.monotonic()
    for _ in range(50):
        client.get(CIT, "m1.small")
    assert time.monotonic() - started < 1.0


def test_a_pass_over_many_servers_is_cheap(cluster, client):
    """One controller pass over 200 booting servers stays well under the time a tick leaves for requests."""
    cluster.seed(instancetype())
    cluster.seed(preference())
    cluster.tick = 3600  # only the passes below
    for i in range(200):
        vm = server_vm(name=f"00000000-0000-4000-8000-{i:012d}")
        vm["status"] = {"stateChangeRequests": [{"action": "Start"}]}
        cluster.seed(vm)
    cluster.lifecycle.step()
    started = time.monotonic()
    for _ in range(5):
        cluster.lifecycle.step()
    assert (time.monotonic() - started) / 5 < 0.15
    assert len(cluster.objects("DataVolume")) == 200
