"""Writes that replace a set of rows (all tags, all metadata of a server) on different servers at once.

Each one deletes a server's rows and inserts new ones. At MariaDB's default REPEATABLE READ such a
delete locks the gaps around the server's rows in the index too, and two of them on neighbouring
servers then wait for each other's gaps when they insert: a deadlock, answered as a 500. Every engine
runs its transactions at READ COMMITTED (PostgreSQL's default), which locks rows, not gaps.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf, user
from tests.databases import throwaway_database
from tests.db.helpers import running_servers
from tests.wsgi_client import Client

SERVERS = 12


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_replacing_the_tags_and_metadata_of_different_servers_at_once_never_deadlocks(backend, tmp_path):
    policies.reset()
    with throwaway_database(backend, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        uuids = running_servers(engine, SERVERS)
        with db_api.reader(engine) as conn:
            level = conn.exec_driver_sql(
                "SHOW TRANSACTION ISOLATION LEVEL" if backend == "postgresql" else "SELECT @@tx_isolation").scalar()
        assert level.replace("-", " ").upper() == "READ COMMITTED"
        client = Client(deploy(conf))
        headers = user("p", name="u", version="2.26")
        errors: list[str] = []
        done = [0]
        stop = threading.Event()

        def writer(seed: int) -> None:
            rng = random.Random(seed)
            mine = uuids[seed::4]
            while not stop.is_set():
                uuid = rng.choice(mine)
                if rng.randrange(2):
                    got = client.put(f"/v2.1/servers/{uuid}/tags", headers=headers,
                                     json_body={"tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(1, 5))]})
                else:
                    got = client.put(f"/v2.1/servers/{uuid}/metadata", headers=headers,
                                     json_body={"metadata": {f"k{rng.randrange(20)}": "v"
                                                             for _ in range(rng.randrange(1, 5))}})
                if got.status_code == 200:
                    done[0] += 1
                else:
                    errors.append(f"{got.status_code} {got.text[:300]}")

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(5)
        stop.set()
        for t in threads:
            t.join(120)
        db_api.dispose_all()
        policies.reset()
    assert not errors, errors[:3]
    assert done[0] > 20
