"""POST /servers/{id}/action: rebuild, the admin actions, soft-delete actions, and the actions KubeVirt
servers cannot do yet. The expected statuses and messages are the live Nova 34.0.0 servers oracle's
answers to the same requests (fake computes; see ../shared/reference/nova/SERVERS-ORACLE.md); what
the actions that cannot run leave behind is what Nova's compute service leaves when its driver raises
NotImplementedError."""

from __future__ import annotations

import pytest

from openkeel_compute.compute.instances import locks, store
from openkeel_compute.db import api as db_api
from openkeel_compute.model import states
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import (
    PATH,
    UUID,
    answer_of,
    demo,
    last_action,
    last_fault,
    local_image_service,
    outbox_rows,
    server_row,
    set_server,
)
from tests.conftest import admin

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


@pytest.fixture
def images(conf, tmp_path):
    with local_image_service(conf, tmp_path):
        yield


def _lock(engine):
    with db_api.transaction(engine) as conn:
        locks.lock(conn, UUID, oracle.DEMO)


# --- not found, bad bodies, policies ----------------------------------------------------------------

VALID = {
    "rebuild": {"imageRef": oracle.IMAGE}, "os-resetState": {"state": "active"}, "injectNetworkInfo": None,
    "restore": None, "forceDelete": None, "shelve": None, "shelveOffload": None, "unshelve": None,
    "rescue": None, "unrescue": None, "createImage": {"name": "snap"},
    "createBackup": {"name": "b", "backup_type": "daily", "rotation": 1}, "changePassword": {"adminPass": "x"},
    "trigger_crash_dump": None, "resize": {"flavorRef": "2"}, "confirmResize": None, "revertResize": None,
    "migrate": None, "os-migrateLive": {"host": None, "block_migration": "auto"},
}


@pytest.mark.parametrize("action", sorted(VALID))
def test_unknown_server_is_not_found_for_every_action(client, engine, action):
    got = client.post(f"/v2.1/servers/{UNKNOWN}/action", headers=admin("2.96"), json_body={action: VALID[action]})
    assert answer_of(got) == (404, f"Instance {UNKNOWN} could not be found.")


def test_bad_bodies_as_nova(client, engine):
    cases = [
        ({"os-resetState": {"state": "deleted"}}, "2.96",
         "Invalid input for field/attribute state. Value: deleted. 'deleted' is not one of ['active', 'error']"),
        ({"os-resetState": {"state": 1}}, "2.96",
         "Invalid input for field/attribute state. Value: 1. 1 is not of type 'string'"),
        ({"resize": {"flavorRef": None}}, "2.96",
         "Invalid input for field/attribute flavorRef. Value: None. None is not of type 'string', 'integer'"),
        ({"trigger_crash_dump": {}}, "2.96",
         "Invalid input for field/attribute trigger_crash_dump. Value: {}. {} is not of type 'null'"),
        ({"changePassword": {}}, "2.96",
         "Invalid input for field/attribute changePassword. Value: {}. 'adminPass' is a required property"),
        ({"unshelve": {}}, "2.77",
         "Invalid input for field/attribute unshelve. Value: {}. 'availability_zone' is a required property"),
        ({"rebuild": {"name": "x"}}, "2.96",
         "Invalid input for field/attribute rebuild. Value: {'name': 'x'}. 'imageRef' is a required property"),
        ({"rebuild": {"imageRef": oracle.IMAGE, "personality": []}}, "2.57",
         ("Invalid input for field/attribute rebuild. Value: {'imageRef': '155d900f-4e14-4e4c-a73d-069cbf4541e6', "
         "'personality': []}. Additional properties are not allowed ('personality' was unexpected)")),
        ({"rebuild": {"imageRef": oracle.IMAGE, "name": " x"}}, "2.96",
         ("An invalid 'name' value was provided. The name must be: printable characters. Can not start or end "
         "with whitespace.")),
    ]
    for body, version, message in cases:
        assert answer_of(client.post(PATH, headers=admin(version), json_body=body)) == (400, message), body
    # trigger_crash_dump exists from 2.17
    got = client.post(PATH, headers=admin("2.16"), json_body={"trigger_crash_dump": None})
    assert answer_of(got) == (404, "The resource could not be found.")
    # resetNetwork was removed from Nova: gone, whatever the server
    got = client.post(f"/v2.1/servers/{UNKNOWN}/action", headers=admin("2.96"), json_body={"resetNetwork": None})
    assert answer_of(got) == (410, "This resource is no longer available. No forwarding address is given.")
    assert got.json == {"computeFault": {"code": 410, "message": got.json["computeFault"]["message"]}}
    assert server_row(engine)["task_state"] is None and outbox_rows(engine) == []


@pytest.mark.parametrize(("action", "rule"), [
    ("os-resetState", "os_compute_api:os-admin-actions:reset_state"),
    ("injectNetworkInfo", "os_compute_api:os-admin-actions:inject_network_info"),
    ("shelveOffload", "os_compute_api:os-shelve:shelve_offload"),
    ("migrate", "os_compute_api:os-migrate-server:migrate"),
    ("os-migrateLive", "os_compute_api:os-migrate-server:migrate_live"),
])
def test_admin_only_actions(client, engine, action, rule):
    got = client.post(PATH, headers=demo(), json_body={action: VALID[action]})
    assert answer_of(got) == (403, f"Policy doesn't allow {rule} to be performed.")


# --- the lock --------------------------------------------------------------------------------------

def test_the_lock_refuses_as_nova_words_it(client, engine):
    _lock(engine)
    for action in ("rebuild", "forceDelete", "shelve", "rescue", "trigger_crash_dump", "resize"):
        got = client.post(PATH, headers=demo("2.96"), json_body={action: VALID[action]})
        assert answer_of(got) == (409, f"Instance {UUID} is locked"), action
    # these two handlers word the lock as an invalid state
    for action in ("restore", "changePassword"):
        got = client.post(PATH, headers=demo(), json_body={action: VALID[action]})
        assert answer_of(got) == (409, f"Instance {UUID} is in an invalid state for '{action}'"), action
    # a snapshot is not refused by the lock: tests/api/servers/test_snapshots.py


# --- admin actions ------------------------------------------------------------------------------------

def test_reset_state_to_error_and_back(client, engine):
    set_server(engine, task_state="powering-off")
    got = client.post(PATH, headers=admin(), json_body={"os-resetState": {"state": "error"}})
    assert (got.status_code, got.content) == (202, b"")
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"], store.status(row)) == ("error", None, "ERROR")
    assert last_action(engine) == ("resetState", [])
    # a locked server too: the lock does not apply
    _lock(engine)
    assert client.post(PATH, headers=admin(), json_body={"os-resetState": {"state": "active"}}).status_code == 202
    assert server_row(engine)["vm_state"] == "active"
    assert outbox_rows(engine) == []


def test_inject_network_info_is_accepted(client, engine):
    assert client.post(PATH, headers=admin(), json_body={"injectNetworkInfo": None}).status_code == 202
    assert server_row(engine)["task_state"] is None and outbox_rows(engine) == []


# --- soft delete -----------------------------------------------------------------------------------------

def test_restore_refuses_a_live_server(client, engine):
    got = client.post(PATH, headers=demo(), json_body={"restore": None})
    assert answer_of(got) == (409, f"Cannot 'restore' instance {UUID} while it is in vm_state active")


def test_force_delete_deletes_now(client, engine):
    set_server(engine, task_state="rebooting")
    got = client.post(PATH, headers=demo(), json_body={"forceDelete": None})
    assert answer_of(got) == (409, f"Cannot 'forceDelete' instance {UUID} while it is in task_state rebooting")
    set_server(engine, task_state=None)
    got = client.post(PATH, headers=demo(), json_body={"forceDelete": None})
    assert (got.status_code, got.content) == (202, b"")
    assert server_row(engine)["task_state"] == "deleting"
    assert [op for op, _ in outbox_rows(engine)] == ["delete"]
    assert last_action(engine) == ("delete", [])


# --- resize refusals (the resize itself: test_resize.py), migrations as with a driver that cannot migrate ---

def test_resize_refusals_as_nova(client, engine):
    got = client.post(PATH, headers=demo(), json_body={"resize": {"flavorRef": "999"}})
    assert answer_of(got) == (400, "Flavor 999 could not be found.")
    got = client.post(PATH, headers=admin(), json_body={"resize": {"flavorRef": "priv-small"}})
    assert answer_of(got) == (400, "When resizing, instances must change flavor!")
    for action in ("confirmResize", "revertResize"):
        got = client.post(PATH, headers=demo(), json_body={action: None})
        assert answer_of(got) == (409, f"Cannot '{action}' instance {UUID} while it is in vm_state active")
    assert outbox_rows(engine) == [] and server_row(engine)["task_state"] is None


def test_a_live_migration_is_recorded_for_the_controller(client, engine):
    """tests/controller/test_live_migrate.py carries it out."""
    got = client.post(PATH, headers=admin("2.96"),
                      json_body={"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert got.status_code == 202, got.text
    assert last_action(engine) == ("live-migration", [])
    assert server_row(engine)["task_state"] == "migrating"
    ((operation, payload),) = outbox_rows(engine)
    assert (operation, payload["host"], payload["block_migration"], payload["conductor_event"]) == (
        "live-migrate", None, None, "conductor_live_migrate_instance")


def test_migrations_by_an_admin(client, engine):
    # a named destination must be known, and not the server's own host for a cold migration
    got = client.post(PATH, headers=admin("2.96"), json_body={"migrate": {"host": "nohost"}})
    assert answer_of(got) == (400, "Compute host nohost could not be found.")
    got = client.post(PATH, headers=admin("2.96"), json_body={"migrate": {"host": "compute1"}})
    assert answer_of(got) == (400, "Cannot migrate to the host where the server exists.")
    got = client.post(PATH, headers=admin("2.96"),
                      json_body={"os-migrateLive": {"host": "nohost", "block_migration": "auto"}})
    assert answer_of(got) == (400, "Compute host nohost could not be found.")
    # before 2.56 a cold migration takes no host; it is recorded for the controller as a resize to the
    # same flavor (tests/controller/test_server_migrate.py carries it out)
    assert client.post(PATH, headers=admin("2.55"), json_body={"migrate": {"host": "nohost"}}).status_code == 202
    assert last_action(engine)[0] == "migrate"
    assert server_row(engine)["task_state"] == "resize_prep"
    ((operation, payload),) = outbox_rows(engine)
    assert (operation, payload["cold"], payload["host"]) == ("resize", True, None)


# --- what KubeVirt servers cannot do yet --------------------------------------------------------------------

def test_rescue_answers_the_password_and_starts_the_task(client, engine):
    got = client.post(PATH, headers=demo(), json_body={"rescue": {"adminPass": "s3cret"}})
    assert (got.status_code, got.json) == (200, {"adminPass": "s3cret"})
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"]) == ("active", "rescuing")
    assert last_action(engine) == ("rescue", [])  # the controller starts compute_rescue_instance
    assert last_fault(engine) is None
    got = client.post(PATH, headers=demo(), json_body={"unrescue": None})
    assert answer_of(got) == (409, f"Cannot 'unrescue' instance {UUID} while it is in vm_state active")
    got = client.post(PATH, headers=demo(), json_body={"rescue": None})
    assert answer_of(got) == (409, f"Cannot 'rescue' instance {UUID} while it is in task_state rescuing")


def test_unshelve_of_an_active_server_conflicts(client, engine):
    # the controller's part: tests/api/servers/test_shelve_e2e.py
    got = client.post(PATH, headers=demo(), json_body={"shelveOffload": None})
    assert answer_of(got) == (403, "Policy doesn't allow os_compute_api:os-shelve:shelve_offload to be performed.")
    got = client.post(PATH, headers=demo(), json_body={"unshelve": None})
    assert answer_of(got) == (409, f"Cannot 'unshelve' instance {UUID} while it is in vm_state active")
    assert server_row(engine)["task_state"] is None


def test_shelve_makes_the_shelved_image_and_starts_the_task(client, engine, images):
    assert client.post(PATH, headers=demo(), json_body={"shelve": None}).status_code == 202
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"]) == ("active", "shelving")
    [(_operation, payload)] = [r for r in outbox_rows(engine) if r[0] == "shelve"]
    assert payload["image_id"]
    assert last_action(engine)[0] == "shelve"
    again = client.post(PATH, headers=demo(), json_body={"shelve": None})
    assert answer_of(again) == (409, f"Cannot 'shelve' instance {UUID} while it is in task_state shelving")


def test_unshelve_of_an_offloaded_server_checks_cores_and_ram_counted_from_placement(client, engine, conf):
    from openkeel_compute.compute import quotas

    set_server(engine, vm_state=states.SHELVED_OFFLOADED, host=None, node=None)
    conf.set_override("count_usage_from_placement", True, group="quota")
    with db_api.transaction(engine) as conn:
        quotas.set_project_limit(conn, server_row(engine)["project_id"], "cores", 0)
    got = client.post(PATH, headers=demo(), json_body={"unshelve": None})
    assert answer_of(got) == (403, "Quota exceeded for resources: ['cores']")
    conf.set_override("count_usage_from_placement", False, group="quota")  # Nova's default: no check
    assert client.post(PATH, headers=demo(), json_body={"unshelve": None}).status_code == 202
    assert server_row(engine)["task_state"] == "unshelving"


def test_change_password_is_not_implemented(client, engine):
    got = client.post(PATH, headers=demo(), json_body={"changePassword": {"adminPass": "x"}})
    assert answer_of(got) == (501, "Unable to set password on instance")
    assert last_action(engine) == ("changePassword", [("compute_set_admin_password", "Error",
                                                        "NotImplementedError")])
    assert server_row(engine)["task_state"] is None
    set_server(engine, power_state=states.power_state.SHUTDOWN)
    got = client.post(PATH, headers=demo(), json_body={"changePassword": {"adminPass": "x"}})
    assert answer_of(got) == (409, f"Failed to set admin password on {UUID} because instance {UUID} is not running")


def test_crash_dump_fails_on_the_compute_side(client, engine):
    got = client.post(PATH, headers=demo("2.17"), json_body={"trigger_crash_dump": None})
    assert (got.status_code, got.content) == (202, b"")
    assert last_action(engine) == ("trigger_crash_dump", [("compute_trigger_crash_dump", "Error",
                                                            "NotImplementedError")])


# --- rebuild: the API's part ---------------------------------------------------------------------------------

# The keys of Nova's answer (oracle, project member) at each microversion.
REBUILD_KEYS = {
    "2.1": {"OS-DCF:diskConfig", "accessIPv4", "accessIPv6", "addresses", "adminPass", "created", "flavor", "hostId",
            "id", "image", "links", "metadata", "name", "progress", "status", "tenant_id", "updated", "user_id"},
}
REBUILD_KEYS["2.54"] = REBUILD_KEYS["2.1"] | {"description", "key_name", "locked", "tags"}
REBUILD_KEYS["2.57"] = REBUILD_KEYS["2.54"] | {"user_data"}
REBUILD_KEYS["2.75"] = REBUILD_KEYS["2.57"] | {
    "OS-EXT-AZ:availability_zone", "OS-EXT-STS:power_state", "OS-EXT-STS:task_state", "OS-EXT-STS:vm_state",
    "OS-SRV-USG:launched_at", "OS-SRV-USG:terminated_at", "config_drive", "locked_reason",
    "os-extended-volumes:volumes_attached", "server_groups", "trusted_image_certificates",
    # from 2.75 rebuild shows what GET shows, the groups of a placed server's ports included (the
    # servers oracle's network fixture binds none, so its recorded body lacks them)
    "security_groups"}


@pytest.mark.parametrize("version", sorted(REBUILD_KEYS))
def test_rebuild_answers_nova_body(client, engine, images, version):
    got = client.post(PATH, headers=demo(version), json_body={"rebuild": {"imageRef": oracle.IMAGE,
                                                                          "name": " new name "[1:-1]}})
    assert got.status_code == 202, got.text
    body = got.json["server"]
    assert set(body) == REBUILD_KEYS[version]
    assert (body["status"], body["name"], body["progress"], len(body["adminPass"])) == ("REBUILD", "new name", 0, 12)
    assert got.header("Location").startswith("http") and got.header("Location").endswith(f"/v2.1/servers/{UUID}")
    row = server_row(engine)
    assert (row["task_state"], row["display_name"]) == ("rebuilding", "new name")
    ((op, payload),) = outbox_rows(engine)
    assert (op, payload["task_state"], payload["old_vm_state"], payload["image_ref"]) == (
        "rebuild", "rebuilding", "active", oracle.IMAGE)
    assert last_action(engine) == ("rebuild", [])


def test_rebuild_by_an_admin_at_2_75_shows_user_data_once(client, engine, images):
    got = client.post(PATH, headers=admin("2.75"), json_body={"rebuild": {"imageRef": oracle.IMAGE}})
    body = got.json["server"]
    assert "OS-EXT-SRV-ATTR:host" in body and "host_status" in body
    assert "user_data" in body and "OS-EXT-SRV-ATTR:user_data" not in body


def test_rebuild_changes_fields_and_image_metadata(client, engine, images):
    got = client.post(PATH, headers=demo("2.90"), json_body={"rebuild": {
        "imageRef": oracle.IMAGE, "metadata": {"rebuild": "server"}, "description": "d", "accessIPv4": "10.0.0.1",
        "user_data": "aGVsbG8=", "hostname": "new-host", "OS-DCF:diskConfig": "AUTO", "adminPass": "pw"}})
    assert got.status_code == 202, got.text
    body = got.json["server"]
    assert (body["metadata"], body["description"], body["accessIPv4"], body["user_data"], body["adminPass"],
            body["OS-DCF:diskConfig"]) == ({"rebuild": "server"}, "d", "10.0.0.1", "aGVsbG8=", "pw", "AUTO")
    assert server_row(engine)["hostname"] == "new-host"
    with db_api.reader(engine) as conn:
        system = store.metadata_of(conn, UUID, system=True)
    assert system["image_base_image_ref"] == oracle.IMAGE
    assert "image_architecture" not in system  # the old image's properties went with it
    assert system["image_disk_format"] == "raw"


def test_rebuild_refusals_as_nova(client, engine, images):
    got = client.post(PATH, headers=demo(), json_body={"rebuild": {"imageRef": UNKNOWN}})
    assert answer_of(got) == (400, "Cannot find image for rebuild")
    got = client.post(PATH, headers=demo("2.54"), json_body={"rebuild": {"imageRef": oracle.IMAGE,
                                                                         "key_name": "nokey"}})
    assert answer_of(got) == (400, "Invalid key_name provided.")
    set_server(engine, vm_state=states.PAUSED)
    got = client.post(PATH, headers=demo(), json_body={"rebuild": {"imageRef": oracle.IMAGE}})
    assert answer_of(got) == (409, f"Cannot 'rebuild' instance {UUID} while it is in vm_state paused")
    set_server(engine, vm_state=states.ACTIVE)
    got = client.post(f"/v2.1/servers/{UUID}/action", headers={"X-Auth-Token": "other:other"},
                      json_body={"rebuild": {"imageRef": oracle.IMAGE}})
    assert answer_of(got) == (404, f"Instance {UUID} could not be found.")
    assert outbox_rows(engine) == [] and server_row(engine)["task_state"] is None


def test_rebuild_from_error_after_reset_state(client, engine, images):
    """Tempest's test_rebuild_server_in_error_state: reset to error, rebuild, the server rebuilds."""
    assert client.post(PATH, headers=admin(), json_body={"os-resetState": {"state": "error"}}).status_code == 202
    got = client.post(PATH, headers=admin(), json_body={"rebuild": {"imageRef": oracle.IMAGE}})
    assert got.status_code == 202, got.text
    assert got.json["server"]["status"] == "REBUILD"
    assert outbox_rows(engine)[0][1]["old_vm_state"] == "error"


def test_rebuild_takes_the_callers_key_pair_its_metadata_quota_and_canonical_access_ips(client, engine, images):
    made = client.post("/v2.1/os-keypairs", headers=demo("2.54"), json_body={"keypair": {"name": "k1"}})
    assert made.status_code == 201, made.text
    got = client.post(PATH, headers=demo("2.54"), json_body={"rebuild": {
        "imageRef": oracle.IMAGE, "key_name": "k1", "accessIPv6": "0:0:0:0:0:ffff:a00:1"}})
    assert got.status_code == 202, got.text
    assert got.json["server"]["key_name"] == "k1"
    row = server_row(engine)
    assert (row["key_name"], row["key_data"]) == ("k1", made.json["keypair"]["public_key"])
    assert row["access_ip_v6"] == "::ffff:a00:1"
    set_server(engine, task_state=None)
    # another user's key pair of the same name is not the caller's
    other = client.post("/v2.1/os-keypairs", headers={"X-Auth-Token": "admin:admin",
                                                      "OpenStack-API-Version": "compute 2.54"},
                        json_body={"keypair": {"name": "k-admin"}})
    assert other.status_code == 201, other.text
    got = client.post(PATH, headers=demo("2.54"), json_body={"rebuild": {"imageRef": oracle.IMAGE,
                                                                         "key_name": "k-admin"}})
    assert answer_of(got) == (400, "Invalid key_name provided.")
    metadata = {f"k{i}": "v" for i in range(129)}
    got = client.post(PATH, headers=demo(), json_body={"rebuild": {"imageRef": oracle.IMAGE, "metadata": metadata}})
    assert answer_of(got) == (403, "Maximum number of metadata items exceeds 128")
