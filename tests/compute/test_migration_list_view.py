"""os-migrations' view for a caller the index:host policy does not allow (a project manager listing its own
project's migrations): Nova 34 keeps the five host keys and nulls them (migrations.py _output, add_host=False);
Tempest's migrations schema requires them (test_live_migration_by_project_manager)."""

from __future__ import annotations

import datetime

from openkeel_compute.compute import migration_list

ROW = {"id": 7, "uuid": "6f1c8b8e-0c4f-4e36-9c3a-0d1f2a3b4c5d", "source_compute": "node-1",
       "dest_compute": "node-2", "source_node": "node-1", "dest_node": "node-2", "dest_host": "10.0.0.2",
       "old_instance_type_id": 1, "new_instance_type_id": 1, "instance_uuid": "a3e9b8c6-1d2f-4a5b-8c7d-9e0f1a2b3c4d",
       "status": "completed", "migration_type": "live-migration", "user_id": "u", "project_id": "p",
       "created_at": datetime.datetime(2026, 12, 5, 23, 0, 0), "updated_at": datetime.datetime(2026, 12, 5, 23, 0, 5)}
HOSTS = ("source_compute", "dest_compute", "source_node", "dest_node", "dest_host")


def test_hosts_are_null_not_missing_without_the_host_policy():
    shown = migration_list.view(ROW, links=True, uuid=True, user_project=True, host=False)
    assert {k: shown[k] for k in HOSTS} == dict.fromkeys(HOSTS)
    assert list(shown) == [k for k in migration_list._ORDER if k in shown]  # Nova's key order kept
    assert shown["instance_uuid"] == ROW["instance_uuid"] and shown["created_at"] == "2026-12-05T23:00:00.000000"


def test_hosts_are_shown_with_the_host_policy():
    shown = migration_list.view(ROW, links=True, uuid=True, user_project=True, host=True)
    assert {k: shown[k] for k in HOSTS} == {k: ROW[k] for k in HOSTS}
