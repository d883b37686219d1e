"""Throwaway databases on the three supported engines.

PostgreSQL (127.0.0.1:5432, trust) and MariaDB (127.0.0.1:3306, root without password) are used
when reachable. Unreachable servers skip their cases, except under OPENKEEL_REQUIRE_DATABASES=1
(.ci/run sets it), where that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid

import pytest
import sqlalchemy as sa

SERVERS = {
    "postgresql": ("127.0.0.1", 5432, "postgresql+psycopg://postgres@127.0.0.1:5432/{db}"),
    "mariadb": ("127.0.0.1", 3306, "mysql+pymysql://root@127.0.0.1:3306/{db}?charset=utf8mb4"),
}
ENGINES = ["sqlite", "postgresql", "mariadb"]


def _reachable(host: str, port: int) -> bool:
    with contextlib.closing(socket.socket()) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def _unavailable(engine: str) -> None:
    message = f"{engine} is not reachable on 127.0.0.1"
    if os.environ.get("OPENKEEL_REQUIRE_DATABASES") == "1":
        pytest.fail(message + " and OPENKEEL_REQUIRE_DATABASES=1", pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def throwaway_database(engine: str, tmp_path):
    """Yield the URL of a new, empty database on ``engine``; drop it afterwards."""
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path}/openkeel-{uuid.uuid4().hex[:8]}.sqlite"
        return
    host, port, template = SERVERS[engine]
    if not _reachable(host, port):
        _unavailable(engine)
    name = f"openkeel_test_{uuid.uuid4().hex[:12]}"
    admin_url = template.format(db="postgres" if engine == "postgresql" else "mysql")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if engine == "postgresql":
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
            else:
                conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        yield template.format(db=name)
    finally:
        from openkeel_compute.db import api as db_api

        db_api.dispose_all()
        with admin.connect() as conn:
            if engine == "postgresql":
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
