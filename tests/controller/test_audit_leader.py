"""The allocations audit is the leader's (issue 27.11): a controller whose Lease another replica holds
never repairs allocations, neither at its start nor in its periodic pass; once it holds the Lease, it does.
Two real replicas on the built-in cluster's Lease, a real Placement."""

from __future__ import annotations

import threading
import time
import uuid as uuidlib

import yaml

from openkeel_compute.controller import providers, service
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.lease import LeaderElector
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import make_conf, placement_overrides
from tests.server_world import reset_placement


def test_only_the_leader_audits(tmp_path, apiserver, placement_service):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(apiserver.kubeconfig()))
    conf = make_conf(tmp_path, placement=placement_overrides(placement_service),
                     controller={"resync_interval": "1", "lease_duration": "2", "lease_renew_interval": "0.2",
                                 "poll_interval": "0.05", "metrics_port": "0", "identity": "replica-b"})
    migration.sync(db_api.get_engine(conf))
    placement = PlacementClient.from_conf(conf)
    reset_placement(placement)
    nodes = list(apiserver.objects("Node").values())
    providers.sync(placement, nodes)
    leaked = str(uuidlib.uuid4())  # a consumer that is no server: the audit gives it back
    placement.put_allocations(leaked, {providers.provider_uuid(nodes[0]["metadata"]["name"]): {"VCPU": 1}},
                              project_id="p", user_id="u", consumer_generation=None)
    client = make_client(str(kubeconfig))
    other = LeaderElector(service.gateway_from(conf, client), conf.controller.lease_name,
                          conf.controller.lease_namespace, "replica-a", 2, 0.2)
    assert other.try_acquire_or_renew()
    other.start()
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(conf,), kwargs={"kubeconfig": str(kubeconfig), "stop": stop},
                              daemon=True)
    thread.start()
    try:
        time.sleep(4)  # its start and several periodic passes, while replica-a leads
        assert thread.is_alive()
        assert placement.get_allocations(leaked).allocations, "a replica without the Lease repaired allocations"
        other.stop(release=True)  # replica-a goes: replica-b takes the Lease, and audits
        deadline = time.monotonic() + 20
        while placement.get_allocations(leaked).allocations and time.monotonic() < deadline:
            time.sleep(0.2)
        assert placement.get_allocations(leaked).allocations == {}
    finally:
        stop.set()
        thread.join(30)
        other.stop()
        client.close()
        reset_placement(placement)
        db_api.dispose_all()
