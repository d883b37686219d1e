"""Key pairs and quotas at boot: key_name reaches the instance row, quotas refuse with Nova's
messages and leave nothing, and concurrent boots near a limit never pass it (every engine)."""

from __future__ import annotations

import concurrent.futures

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.keypairs_quotas.helpers import ED25519
from tests.api.servers.helpers import IMAGE, local_image_service, row_counts
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database
from tests.wsgi_client import Client

ADMIN = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "compute 2.57"}


def _headers(token="demo:demo", version="2.96"):
    return {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}


def boot_server(client, token="demo:demo", version="2.96", **fields):
    body = {"server": {"name": "q", "imageRef": IMAGE, "flavorRef": "1", "networks": "none", **fields}}
    if version < "2.37":
        body["server"].pop("networks")
    return client.post("/v2.1/servers", headers=_headers(token, version), json_body=body)


@pytest.fixture
def cloud(client, conf, tmp_path):
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
        catalog.create(conn, name="m1.medium", memory_mb=4096, vcpus=2, root_gb=40, flavorid="3")
    with local_image_service(conf, tmp_path):
        yield client, engine


def test_key_name_is_the_callers_key_pair_and_reaches_the_instance(cloud):
    client, engine = cloud
    made = client.post("/v2.1/os-keypairs", headers=_headers(version="2.2"),
                       json_body={"keypair": {"name": "mine", "public_key": ED25519}})
    assert made.status_code == 201, made.text
    before = row_counts(engine)
    other = boot_server(client, token="other:demo", key_name="mine")
    assert (other.status_code, other.json) == (400, {"badRequest": {"code": 400,
                                                                     "message": "Invalid key_name provided."}})
    assert row_counts(engine) == before
    got = boot_server(client, key_name="mine")
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    with db_api.reader(engine) as conn:
        row = conn.execute(sa.select(models.INSTANCES.c.key_name, models.INSTANCES.c.key_data)
                           .where(models.INSTANCES.c.uuid == uuid)).one()
    assert tuple(row) == ("mine", ED25519)
    shown = client.get(f"/v2.1/servers/{uuid}", headers=_headers())
    assert shown.json["server"]["key_name"] == "mine"


def _refusal(got):
    return got.status_code, got.json.get("forbidden", {}).get("message")


def test_instances_cores_and_ram_quotas_refuse_as_nova_and_write_nothing(cloud):
    client, engine = cloud
    assert client.put("/v2.1/os-quota-sets/demo", headers=ADMIN,
                      json_body={"quota_set": {"cores": 3, "instances": 5, "ram": 2048}}).status_code == 200
    before = row_counts(engine)
    assert _refusal(boot_server(client, flavorRef="3", min_count=2)) == (
        403, "Quota exceeded for cores, ram: Requested 4, 8192, but already used 0, 0 of 3, 2048 cores, ram")
    assert row_counts(engine) == before
    # max_count is cut down to what fits (3 of 5, by cores), min_count is honoured
    got = boot_server(client, flavorRef="1", min_count=1, max_count=5)
    assert got.status_code == 202, got.text
    assert row_counts(engine)[0] == before[0] + 3
    assert _refusal(boot_server(client, flavorRef="1")) == (
        403, "Quota exceeded for cores: Requested 1, but already used 3 of 3 cores")
    limits = client.get("/v2.1/limits", headers=_headers()).json["limits"]["absolute"]
    assert (limits["totalInstancesUsed"], limits["totalCoresUsed"], limits["totalRAMUsed"]) == (3, 3, 1536)


def test_metadata_and_personality_quotas(cloud):
    client, engine = cloud
    client.put("/v2.1/os-quota-sets/demo", headers=ADMIN, json_body={"quota_set": {"metadata_items": 1}})
    client.put("/v2.1/os-quota-sets/demo", headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.1"}),
               json_body={"quota_set": {"injected_files": 1, "injected_file_path_bytes": 4}})
    before = row_counts(engine)
    assert _refusal(boot_server(client, metadata={"a": "1", "b": "2"})) == (
        403, "Maximum number of metadata items exceeds 1")
    files = [{"path": "/a", "contents": "YQ=="}, {"path": "/b", "contents": "YQ=="}]
    assert _refusal(boot_server(client, version="2.1", personality=files)) == (403, "Personality file limit exceeded")
    assert _refusal(boot_server(client, version="2.1", personality=[{"path": "/long", "contents": "YQ=="}])) == (
        403, "Personality file path exceeds maximum 4")
    assert row_counts(engine) == before


@pytest.mark.parametrize("engine_name", ENGINES)
def test_concurrent_boots_near_the_limit_never_pass_it(engine_name, tmp_path):
    from openkeel_compute.api.deploy import deploy

    with throwaway_database(engine_name, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url}, quota={"instances": 3})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        client = Client(deploy(conf))
        with db_api.transaction(engine) as conn:
            catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
        with local_image_service(conf, tmp_path), concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda _: boot_server(client).status_code, range(8)))
        assert sorted(statuses) == [202] * 3 + [403] * 5
        with db_api.reader(engine) as conn:
            live = conn.execute(sa.select(sa.func.count()).select_from(models.INSTANCES)
                                .where(models.INSTANCES.c.deleted == 0)).scalar()
        assert live == 3
        db_api.dispose_all()
