"""Differences the servers differential (tools/server_api_differential.py) found against the Nova 34.0.0
servers oracle, each pinned with the oracle's answer."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import IMAGE, boot_server, local_image_service, row_counts, server_body
from tests.conftest import admin

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset


@pytest.mark.parametrize(("fields", "message"), [
    # an image on the local disk only as the copy of imageRef, at boot index 0
    ({"imageRef": "", "block_device_mapping_v2": [{"boot_index": 0, "uuid": IMAGE, "source_type": "image",
                                                   "destination_type": "local"}]},
     "Block Device Mapping is Invalid: Mapping image to local is not supported."),
    ({"block_device_mapping_v2": [{"boot_index": 1, "uuid": IMAGE, "source_type": "image",
                                   "destination_type": "local"}]},
     "Block Device Mapping is Invalid: Mapping image to local is not supported."),
    # one zone, Nova's default one; the check comes after the flavor's and before the image's
    ({"availability_zone": "zone-x"}, "The requested availability zone is not available"),
    ({"availability_zone": "zone-x", "imageRef": "11111111-1111-1111-1111-111111111111"},
     "The requested availability zone is not available"),
    ({"availability_zone": "a:b:c:d"}, "Invalid input received: Unable to parse availability_zone"),
])
def test_boot_refusals(client, engine, images, flavors, fields, message):
    before = row_counts(engine)
    got = boot_server(client, server_body(**fields))
    assert (got.status_code, got.json) == (400, {"badRequest": {"code": 400, "message": message}})
    assert row_counts(engine) == before


def test_a_port_that_is_not_a_uuid_before_2_37(client, engine, images, flavors):
    got = boot_server(client, server_body(networks=[{"port": "nope"}]), version="2.11")
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "Invalid input for field/attribute port. Value: nope. 'nope' is not a 'uuid'")


def test_an_image_bdm_copying_image_ref_and_the_default_zone_boot(client, engine, images, flavors):
    got = boot_server(client, server_body(availability_zone="nova", block_device_mapping_v2=[
        {"boot_index": 0, "uuid": IMAGE, "source_type": "image", "destination_type": "local"}]))
    assert got.status_code == 202, got.text


def test_the_server_keeps_its_images_properties_and_kernel(client, engine, conf, tmp_path, flavors):
    # Nova's fixture image: kernel "nokernel" (none), architecture x86_64; 2.98 shows the property
    from openkeel_compute.images import local

    directory = tmp_path / "images"
    directory.mkdir()
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    local.register(directory, disk, name="fakeimage123456", image_id=IMAGE, disk_format="raw", container_format="raw",
                   properties={"kernel_id": "nokernel", "ramdisk_id": "nokernel", "architecture": "x86_64"})
    with local_image_service(conf, tmp_path):
        got = boot_server(client, server_body(), version="2.98")
        assert got.status_code == 202, got.text
        uuid = got.json["server"]["id"]
        shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.98")).json["server"]
    assert shown["image"]["properties"] == {"architecture": "x86_64"}
    assert (shown["OS-EXT-SRV-ATTR:kernel_id"], shown["OS-EXT-SRV-ATTR:ramdisk_id"]) == ("", "")
    with db_api.reader(engine) as conn:
        meta = dict(conn.execute(sa.select(models.INSTANCE_SYSTEM_METADATA.c.key,
                                           models.INSTANCE_SYSTEM_METADATA.c.value)
                                 .where(models.INSTANCE_SYSTEM_METADATA.c.instance_uuid == uuid)).all())
    assert meta == {"image_kernel_id": "nokernel", "image_ramdisk_id": "nokernel", "image_architecture": "x86_64",
                    "image_min_ram": "0", "image_min_disk": "1", "image_disk_format": "raw",
                    "image_container_format": "raw", "image_base_image_ref": IMAGE,
                    "requested_networks": "none", "security_groups": "null",  # networks "none": the VM gets no interface
                    "openkeel_image_name": "fakeimage123456"}  # for the build's and rebuilds' notifications


@pytest.fixture
def cloud(app, conf):
    oracle.boot_list_scenario(db_api.get_engine(conf))


@pytest.mark.parametrize("query", ["sort_key=vcpus", "sort_key=vcpus&sort_dir=asc", "sort_key=id&sort_dir=asc",
                                   "sort_key=memory_mb&sort_key=root_gb"])
def test_ignored_sort_keys_leave_novas_default_order(client, cloud, query):
    # keys Nova ignores before 2.75 take their direction with them: newest first, as without them
    got = client.get(f"/v2.1/servers?{query}", headers={"X-Auth-Token": "demo:demo"})
    assert got.status_code == 200, got.text
    assert [s["name"] for s in got.json["servers"]] == ["srv-b", "srv-a"]


def _before_2_37(**fields):
    body = server_body(**fields)
    del body["server"]["networks"]
    return body


def test_before_2_19_the_description_is_the_name(client, engine, images, flavors):
    for version, expected in (("2.18", "v1"), ("2.19", None)):
        got = boot_server(client, _before_2_37(), version=version)
        assert got.status_code == 202, got.text
        shown = client.get(f"/v2.1/servers/{got.json['server']['id']}", headers=admin("2.19")).json["server"]
        assert shown["description"] == expected, version


@pytest.mark.parametrize("value", ["false", "0", "no", True])
def test_any_return_reservation_id_given_returns_it(client, engine, images, flavors, value):
    # Nova asks only whether the value is there: even "false" answers with the reservation id
    got = boot_server(client, _before_2_37(return_reservation_id=value), version="2.2")
    assert got.status_code == 202, got.text
    assert list(got.json) == ["reservation_id"] and got.header("Location") is None


def test_novas_boolean_values(client, engine, images, flavors):
    got = boot_server(client, _before_2_37(return_reservation_id="y"), version="2.2")
    assert got.json["badRequest"]["message"] == (
        "Invalid input for field/attribute return_reservation_id. Value: y. 'y' is not one of [True, 'True', "
        "'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', 'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', "
        "'Off', 'off', 'NO', 'No', 'no']")


@pytest.mark.parametrize(("query", "names"), [("power_state=1", ["srv-z"]), ("power_state=x", []),
                                              ("power_state=4", []), ("progress=0", ["srv-z"])])
def test_power_state_and_progress_filters_are_regular_expressions(client, cloud, query, names):
    got = client.get(f"/v2.1/servers?{query}", headers=admin())
    assert [s["name"] for s in got.json["servers"]] == names


@pytest.mark.parametrize("query", ["ip=%5E8%5C.", "ip6=%3A%3A9"])
def test_an_unknown_marker_is_refused_even_when_nothing_matches(client, cloud, query):
    got = client.get(f"/v2.1/servers/detail?marker=00000000-0000-4000-8000-000000000015&{query}",
                     headers={"X-Auth-Token": "demo:demo"})
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "marker [00000000-0000-4000-8000-000000000015] not found"}})


def test_an_unknown_flavor_lists_nothing_before_the_marker_is_looked_up(client, cloud):
    # Nova 34.0.0 (servers oracle): the flavor is looked up first; none answers an empty list
    got = client.get("/v2.1/servers/detail?marker=00000000-0000-4000-8000-000000000015&flavor=nope",
                     headers={"X-Auth-Token": "demo:demo"})
    assert (got.status_code, got.json) == (200, {"servers": []})



def _names(client, query, version="2.60"):
    got = client.get(f"/v2.1/servers?all_tenants=1&{query}", headers=admin(version))
    assert got.status_code == 200, got.text
    return [s["name"] for s in got.json["servers"]]


def _uuid_order(*pairs):
    """Names ordered by their servers' uuids (Nova's tie-break)."""
    return [name for _uuid, name in sorted(pairs)]



@pytest.mark.parametrize("query", ["sort_key=user_id", "sort_key=user_id&sort_dir=asc", "sort_key=access_ip_v4",
                                   "sort_key=locked_by&sort_dir=desc"])
def test_ties_are_ordered_by_uuid_ascending(client, cloud, query):
    # srv-a and srv-b tie on every key here: Nova orders them by uuid, ascending, whatever the key's direction
    assert _names(client, f"{query}&project_id=demo") == _uuid_order((oracle.SERVER_A, "srv-a"),
                                                                     (oracle.SERVER_B, "srv-b"))


def test_the_uuid_tie_break_takes_the_first_direction_when_a_key_has_none(client, cloud):
    # keys project_id, user_id, uuid with the one direction "desc": Nova pads the directions after the uuid's
    # "asc" with the first one, so user_id is ascending and uuid descending
    ties = _uuid_order((oracle.SERVER_A, "srv-a"), (oracle.SERVER_B, "srv-b"))[::-1]
    assert _names(client, "sort_key=project_id&sort_key=user_id&sort_dir=desc") == [*ties, "srv-z"]


def test_only_keys_nova_ignores_left_and_a_direction_is_too_many(client, cloud):
    got = client.get("/v2.1/servers?sort_key=vcpus&sort_dir=asc&sort_dir=asc", headers=admin())
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "Invalid input received: Sort direction size exceeds sort key size"}})
    # the only direction goes with the key Nova ignores: newest first
    assert _names(client, "sort_key=vcpus&sort_dir=bogus&project_id=demo") == ["srv-b", "srv-a"]


@pytest.mark.parametrize(("query", "names"), [
    ("description=%5E%24", ["srv-b", "srv-a"]),  # no column of that name: Nova ignores it
    ("description=nothing-matches", ["srv-b", "srv-a"]),
    ("display_description=nothing-matches", []),  # the column's name filters
    ("terminated_at=2026", []),  # times are matched on their text; a NULL matches nothing
    ("launched_at=2026-12-01", ["srv-b", "srv-a"]), ("launched_at=09%3A55%3A14", ["srv-b"]),
    ("created_at=%5E2026", ["srv-b", "srv-a"]),
    ("launch_index=0", ["srv-b", "srv-a"]), ("launch_index=%5E1", []),  # a regular expression, not equality
    ("power_state=%5E1%24", ["srv-b", "srv-a"]),
    ("deleted_at=2026", ["srv-b", "srv-a"]), ("locked_reason=x", ["srv-b", "srv-a"]),  # not in the schema: dropped
])
def test_filters_on_novas_columns_are_regular_expressions(client, cloud, query, names):
    assert _names(client, f"{query}&project_id=demo") == names


def test_soft_deleted_turns_the_soft_deleted_rule_around(client, cloud, conf):
    from openkeel_compute.compute.instances import cas
    from openkeel_compute.model import states

    with db_api.transaction(db_api.get_engine(conf)) as conn:
        cas.save_state(conn, oracle.SERVER_B, vm_state=states.SOFT_DELETED)
    # Nova reads any text but "" as true here: the live list then shows the soft-deleted server
    assert _names(client, "project_id=demo") == ["srv-a"]
    assert _names(client, "project_id=demo&soft_deleted=false") == ["srv-b", "srv-a"]
    assert _names(client, "project_id=demo&deleted=true") == ["srv-b", "srv-legacy"]
    assert _names(client, "project_id=demo&deleted=true&soft_deleted=1") == ["srv-b", "srv-legacy"]
    assert _names(client, "project_id=demo&deleted=true&soft_deleted=") == ["srv-legacy"]  # "" is false


def test_a_deleted_server_shows_no_host_status_and_no_addresses(client, cloud, conf):
    # Nova 34.0.0 (servers oracle, GET /servers/detail?deleted=true at 2.20, a server stopped then deleted):
    # host_status "" (its host's service is joined only to live servers) and addresses {} (the network went
    # with the delete), while the host itself is still shown
    import json

    with db_api.transaction(db_api.get_engine(conf)) as conn:  # the addresses it had when it was deleted
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == oracle.SERVER_LEGACY)
                     .values(network_info=json.dumps(oracle.ADDRESSES)))
    got = client.get("/v2.1/servers/detail?deleted=true&all_tenants=1", headers=admin("2.20"))
    (server,) = got.json["servers"]
    assert (server["id"], server["host_status"], server["addresses"]) == (oracle.SERVER_LEGACY, "", {})
    assert server["OS-EXT-SRV-ATTR:host"] == "compute1"
    live = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=admin("2.20")).json["server"]
    assert live["host_status"] == "UP" and live["addresses"] != {}
