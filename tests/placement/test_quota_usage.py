"""[quota] count_usage_from_placement: cores (VCPU + PCPU) and ram (MEMORY_MB) from Placement's usages of
the project or of a user in it, as Nova counts them; the API's quota details show them."""

from __future__ import annotations

import uuid

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.compute import quotas
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import admin, make_conf, placement_overrides
from tests.wsgi_client import Client


def test_cores_and_ram_come_from_placement(tmp_path, placement_service):
    policies.reset()
    conf = make_conf(tmp_path, quota={"count_usage_from_placement": "true"},
                     placement=placement_overrides(placement_service))
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    placement = PlacementClient.from_conf(conf)
    shared, dedicated = str(uuid.uuid4()), str(uuid.uuid4())
    placement.create_provider(shared, f"n-{shared}")
    placement.set_inventories(shared, 0, {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 8192}})
    placement.create_provider(dedicated, f"n-{dedicated}")
    placement.set_inventories(dedicated, 0, {"PCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}})
    project = uuid.uuid4().hex
    held = [("u1", shared, {"VCPU": 2, "MEMORY_MB": 1024}), ("u1", dedicated, {"PCPU": 4, "MEMORY_MB": 2048}),
            ("u2", shared, {"VCPU": 1, "MEMORY_MB": 512})]
    for user, rp, resources in held:
        placement.put_allocations(str(uuid.uuid4()), {rp: resources}, project_id=project, user_id=user,
                                  consumer_generation=None)
    try:
        with db_api.reader(engine) as conn:
            used = quotas.counts(conn, conf, project)
            mine = quotas.counts(conn, conf, project, "u1")
        # no instance rows at all: the counts are Placement's
        assert (used["instances"], used["cores"], used["ram"]) == (0, 7, 3584)
        assert (mine["cores"], mine["ram"]) == (6, 3072)
        got = Client(deploy(conf)).get(f"/v2.1/os-quota-sets/{project}/detail", headers=admin())
        assert got.status_code == 200, got.text
        assert (got.json["quota_set"]["cores"]["in_use"], got.json["quota_set"]["ram"]["in_use"]) == (7, 3584)
    finally:
        for provider in (shared, dedicated):
            for consumer in placement.provider_allocations(provider):
                placement.delete_allocations(consumer)
            placement.delete_provider(provider)
        db_api.dispose_all()
        policies.reset()


def test_placement_unreachable_is_novas_500_for_a_count(tmp_path):
    """Counting from a Placement that does not answer: Nova's API gives its generic 500 naming the
    keystoneauth error its report client let through; nothing else is answered or written."""
    import socket

    policies.reset()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    conf = make_conf(tmp_path, quota={"count_usage_from_placement": "true"},
                     placement=dict(placement_overrides(dead), timeout="2"))
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    try:
        client = Client(deploy(conf))
        project = uuid.uuid4().hex
        for path in (f"/v2.1/os-quota-sets/{project}/detail", f"/v2.1/limits?tenant_id={project}"):
            got = client.get(path, headers=admin())
            assert got.status_code == 500, (path, got.text)
            assert got.json == {"computeFault": {
                "code": 500, "message": "Unexpected API Error. Please contact the administrator\n"
                                        "<class 'keystoneauth1.exceptions.connection.ConnectFailure'>"}}, got.text
        # without counting from Placement the database counts: the same call answers
        (tmp_path / "db").mkdir()
        plain = make_conf(tmp_path / "db", placement=placement_overrides(dead))
        migration.sync(db_api.get_engine(plain))
        assert Client(deploy(plain)).get(f"/v2.1/os-quota-sets/{project}/detail", headers=admin()).status_code == 200
    finally:
        db_api.dispose_all()
        policies.reset()
