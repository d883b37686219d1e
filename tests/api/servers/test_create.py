"""POST /servers against Nova 34.0.0's answers (recorded exchanges and the servers oracle's words)."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import IMAGE, QUEUED, boot_server, local_image_service, row_counts, server_body
from tests.conftest import make_conf, user
from tests.databases import ENGINES, throwaway_database

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

MISSING = "11111111-1111-1111-1111-111111111111"


def _nothing_left(engine, before):
    assert row_counts(engine) == before


def test_boot_answers_as_nova_and_writes_one_transaction(client, engine, images, flavors):
    exchange = oracle.recorded("boot with shared private flavor")
    before = row_counts(engine)
    got = boot_server(client, exchange["request_body"])
    assert got.status_code == 202, got.text
    body = got.json["server"]
    uuid = body["id"]
    expected = oracle.as_ours(exchange["body"], client.host)["server"]
    expected_id = expected["id"]
    expected = {k: (v.replace(expected_id, uuid) if isinstance(v, str) else v) for k, v in expected.items()}
    expected["links"] = [dict(link, href=link["href"].replace(expected_id, uuid)) for link in expected["links"]]
    assert list(body) == list(expected)
    assert re.fullmatch(r"[2-9A-HJ-NP-Za-km-z]{12}", body.pop("adminPass"))
    expected.pop("adminPass")
    assert body == expected
    assert got.header("Location") == f"http://{client.host}/v2.1/servers/{uuid}"
    assert row_counts(engine) == tuple(n + 1 for n in before)
    with db_api.reader(engine) as conn:
        row = conn.execute(sa.select(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid)).mappings().one()
        action = conn.execute(sa.select(models.INSTANCE_ACTIONS)).mappings().one()
        outbox = conn.execute(sa.select(models.OUTBOX).where(models.OUTBOX.c.kind == "server")).mappings().one()
    assert (row["vm_state"], row["task_state"], row["display_name"], row["hostname"], row["image_ref"],
            row["project_id"], row["memory_mb"]) == ("building", "scheduling", "srv-a", "srv-a", IMAGE, "demo", 512)
    assert '"flavorid":"priv-small"' in row["flavor"]
    assert (action["action"], action["instance_uuid"]) == ("create", uuid)
    assert (outbox["kind"], outbox["object_id"], outbox["operation"]) == ("server", uuid, "create")
    assert outbox["payload"] == {"request_id": action["request_id"], "task_state": "scheduling"}
    # the new server is shown by the servers API
    shown = client.get(f"/v2.1/servers/{uuid}", headers=user("demo", version="2.96"))
    assert (shown.status_code, shown.json["server"]["status"]) == (200, "BUILD")


@pytest.mark.parametrize("step", ["boot with private flavor NOT shared -> 400", "boot with unknown flavor -> 400",
                                  "no networks @2.96 -> 400 (required since 2.37)", "no name -> 400",
                                  "bad imageRef -> 400"])
def test_refusals_answer_as_nova_and_leave_nothing(client, engine, images, flavors, step):
    exchange = oracle.recorded(step)
    before = row_counts(engine)
    version = exchange["request_headers"]["OpenStack-API-Version"].split()[1]
    got = boot_server(client, exchange["request_body"], version=version)
    assert (got.status_code, got.json) == (exchange["status"], exchange["body"])
    _nothing_left(engine, before)


def test_boot_at_2_1_without_networks(client, engine, images, flavors):
    exchange = oracle.recorded("boot @2.1 without networks (no NIC available) -> 202")
    got = boot_server(client, exchange["request_body"], version="2.1")
    assert got.status_code == 202, got.text
    assert list(got.json["server"]) == list(exchange["body"]["server"])


# The servers oracle's answers (Nova 34.0.0) for what OpenKeel has not got.
@pytest.mark.parametrize(("fields", "message"), [
    ({"imageRef": MISSING}, "Can not find requested image"),
    ({"imageRef": QUEUED}, f"Image {QUEUED} is not active."),
    ({"key_name": "nokey"}, "Invalid key_name provided."),
    ({"networks": [{"uuid": MISSING}]}, f"Network {MISSING} could not be found."),
    ({"networks": [{"port": MISSING}]}, f"Port id {MISSING} could not be found."),
    ({"imageRef": ""}, "Missing imageRef attribute"),
    ({"min_count": 3, "max_count": 2}, "min_count must be <= max_count"),
    ({"hostname": "h1", "max_count": 2}, "Unable to allocate a single hostname to multiple instances"),
    ({"personality": []}, ("Invalid input for field/attribute server. Value: {'name': 'v1', 'imageRef': "
     f"'{IMAGE}', 'flavorRef': 'priv-small', 'networks': 'none', 'personality': []}}. Additional properties are "
     "not allowed ('personality' was unexpected)")),
])
def test_what_openkeel_cannot_give_is_refused_as_nova_does(client, engine, images, flavors, fields, message):
    before = row_counts(engine)
    got = boot_server(client, server_body(**fields))
    assert (got.status_code, got.json) == (400, {"badRequest": {"code": 400, "message": message}})
    _nothing_left(engine, before)


@pytest.mark.parametrize(("fields", "message"), [
    ({"flavorRef": "nope", "imageRef": MISSING, "networks": [{"uuid": MISSING}]}, "Flavor nope could not be found."),
    ({"imageRef": MISSING, "networks": [{"uuid": MISSING}], "key_name": "x"}, "Can not find requested image"),
    ({"networks": [{"uuid": MISSING}], "key_name": "x"}, f"Network {MISSING} could not be found."),
    ({"imageRef": "", "flavorRef": "nope"}, "Missing imageRef attribute"),
    ({"imageRef": "", "min_count": 3, "max_count": 2}, "min_count must be <= max_count"),
])
def test_checks_come_in_novas_order(client, images, flavors, fields, message):
    # the oracle's first complaint when several things are wrong
    got = boot_server(client, server_body(**fields))
    assert got.json == {"badRequest": {"code": 400, "message": message}}


def test_disabled_flavor_is_not_found_by_its_internal_id(client, engine, images, flavors):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.FLAVORS).where(models.FLAVORS.c.flavorid == "priv-small").values(disabled=True))
    before = row_counts(engine)
    got = boot_server(client, server_body())
    assert got.json == {"badRequest": {"code": 400, "message": f"Flavor {flavors['id']} could not be found."}}
    _nothing_left(engine, before)


def test_return_reservation_id_and_several_servers(client, engine, images, flavors):
    got = boot_server(client, server_body(return_reservation_id=True, min_count=2, max_count=2))
    assert got.status_code == 202, got.text
    assert list(got.json) == ["reservation_id"]
    assert got.header("Location") is None
    with db_api.reader(engine) as conn:
        rows = conn.execute(sa.select(models.INSTANCES).order_by(models.INSTANCES.c.launch_index)).mappings().all()
        outbox = conn.execute(sa.select(sa.func.count()).select_from(models.OUTBOX)
                              .where(models.OUTBOX.c.kind == "server")).scalar()
    assert [(r["display_name"], r["launch_index"], r["reservation_id"]) for r in rows] == [
        ("v1-1", 0, got.json["reservation_id"]), ("v1-2", 1, got.json["reservation_id"])]
    assert outbox == 2


def test_fields_are_kept(client, engine, images, flavors):
    got = boot_server(client, server_body(description="d", hostname="h1", metadata={"a": "b"}, tags=["t1"],
                                adminPass="secret", **{"OS-DCF:diskConfig": "AUTO"}), version="2.96")
    assert got.status_code == 202, got.text
    server = got.json["server"]
    assert (server["adminPass"], server["OS-DCF:diskConfig"]) == ("secret", "AUTO")
    shown = client.get(f"/v2.1/servers/{server['id']}", headers=user("demo", version="2.96")).json["server"]
    assert (shown["description"], shown["OS-EXT-SRV-ATTR:hostname"], shown["metadata"], shown["tags"]) == (
        "d", "h1", {"a": "b"}, ["t1"])


def test_access_ips_are_kept_in_canonical_form(client, images, flavors):
    # Tempest's test_verify_server_details: Nova keeps access IPs as addresses, so a long IPv6 form
    # (41 characters, more than the column's 39) comes back compressed, as PUT /servers/{id} keeps it.
    got = boot_server(client, server_body(accessIPv4="1.1.1.1", accessIPv6="0000:0000:0000:0000:0000:babe:220.12.22.2"))
    assert got.status_code == 202, got.text
    shown = client.get(f"/v2.1/servers/{got.json['server']['id']}", headers=user("demo", version="2.96"))
    assert (shown.json["server"]["accessIPv4"], shown.json["server"]["accessIPv6"]) == ("1.1.1.1", "::babe:dc0c:1602")


@pytest.mark.parametrize("flavor_ref", ["http://x/flavors/priv-small", "priv-small"])
def test_flavor_ref_may_be_a_link(client, images, flavors, flavor_ref):
    assert boot_server(client, server_body(flavorRef=flavor_ref)).status_code == 202


def test_integer_flavor_ref(client, engine, images, flavors):
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="one", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
    assert boot_server(client, server_body(flavorRef=1)).status_code == 202


def test_description_before_2_19_is_refused(client, images, flavors):
    got = boot_server(client, {"server": {"name": "k", "imageRef": IMAGE, "flavorRef": "priv-small", "description": "d"}},
                version="2.18")
    assert got.json["badRequest"]["message"] == (
        f"Invalid input for field/attribute server. Value: {{'name': 'k', 'imageRef': '{IMAGE}', 'flavorRef': "
        "'priv-small', 'description': 'd'}. Additional properties are not allowed ('description' was unexpected)")


def test_hostname_before_2_90_is_refused(client, images, flavors):
    got = boot_server(client, server_body(hostname="h1"), version="2.89")
    assert got.status_code == 400
    assert "('hostname' was unexpected)" in got.json["badRequest"]["message"]


@pytest.mark.parametrize("engine_name", ENGINES)
def test_boot_and_refusal_on_every_engine(engine_name, tmp_path):
    """The one transaction and the refusal that leaves nothing, on SQLite, PostgreSQL and MariaDB."""
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    with throwaway_database(engine_name, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        app = deploy(conf)
        client = Client(app)
        with db_api.transaction(engine) as conn:
            catalog.create(conn, name="priv.small", memory_mb=512, vcpus=1, root_gb=1, flavorid="priv-small",
                           is_public=False)
            catalog.add_access(conn, catalog.get(conn, "priv-small"), "demo")
        with local_image_service(conf, tmp_path):
            before = row_counts(engine)
            refused = boot_server(client, server_body(key_name="nokey", metadata={"a": "b"}, tags=["t"]))
            assert refused.status_code == 400
            _nothing_left(engine, before)
            got = boot_server(client, server_body(metadata={"a": "b"}, tags=["t"], min_count=2,
                                        accessIPv6="0000:0000:0000:0000:0000:babe:220.12.22.2"))
            assert got.status_code == 202, got.text
            assert row_counts(engine) == tuple(n + 2 for n in before)
        db_api.dispose_all()


def test_zero_disk_flavor_needs_the_policy(client, engine, images, flavors):
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="zero", memory_mb=512, vcpus=1, root_gb=0, flavorid="zero")
    before = row_counts(engine)
    got = boot_server(client, server_body(flavorRef="zero"))
    assert (got.status_code, got.json) == (403, {"forbidden": {
        "code": 403, "message": "Only volume-backed servers are allowed for flavors with zero disk."}})
    _nothing_left(engine, before)
    assert boot_server(client, server_body(flavorRef="zero"), token="admin:admin").status_code == 202


@pytest.mark.parametrize(("rule", "fields"), [("os_compute_api:servers:create", {}),
                                              ("os_compute_api:servers:create:attach_network",
                                               {"networks": [{"uuid": MISSING}]}),
                                              ("os_compute_api:servers:create:attach_network", {"networks": "auto"})])
def test_create_policies_are_checked_first(tmp_path, rule, fields):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f'"{rule}": "!"\n')
    policies.reset()
    conf = make_conf(tmp_path, oslo_policy={"policy_file": str(policy_file)})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    try:
        client = Client(deploy(conf))
        before = row_counts(engine)
        # before the flavor is even looked up (this one does not exist)
        got = boot_server(client, server_body(flavorRef="nope", **fields))
        assert (got.status_code, got.json) == (403, {"forbidden": {
            "code": 403, "message": f"Policy doesn't allow {rule} to be performed."}})
        _nothing_left(engine, before)
    finally:
        policies.reset()
        db_api.dispose_all()
