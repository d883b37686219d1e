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


# -- Database servers of one's own: stopped, started and killed at will ---------------------------------


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(") ", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


class OwnServer:
    """A PostgreSQL or MariaDB server of a test's own, in a directory of its own, on 127.0.0.1:``port``.

    Never the machine's shared servers: ``stop()``, ``kill()`` and ``start()`` act on this instance
    only, so a test can take the database away under a running API and bring it back. The data
    survive a stop (``kill`` is a crash: SIGKILL, recovery at the next start). ``url`` holds a
    database named ``openkeel``, created at the first start.
    """

    def __init__(self, engine: str, directory, port: int):
        import pathlib
        import shutil

        if engine not in SERVERS:
            raise ValueError(f"no server engine {engine!r}")
        tools = ("initdb", "pg_ctl") if engine == "postgresql" else ("mariadb-install-db", "mariadbd")
        missing = [tool for tool in tools if shutil.which(tool) is None
                   and not pathlib.Path("/usr/sbin", tool).exists()]
        if missing:
            pytest.skip(f"{engine} server programs not installed ({', '.join(missing)})")
        self.engine, self.port = engine, port
        self.directory = pathlib.Path(directory)
        if engine == "postgresql" and os.geteuid() == 0:
            # The postgres account cannot reach into root's private temporary directories (pytest's
            # tmp_path): the cluster gets a directory of its own, removed by ``remove()``.
            import tempfile

            self.directory = pathlib.Path(tempfile.mkdtemp(prefix="openkeel-pg-"))
            shutil.chown(self.directory, "postgres")
        self.data = self.directory / "data"
        self.process = None
        scheme = SERVERS[engine][2].split("://", 1)[0]
        user = "postgres" if engine == "postgresql" else "root"
        suffix = "?charset=utf8mb4" if engine == "mariadb" else ""
        self.url = f"{scheme}://{user}@127.0.0.1:{port}/openkeel{suffix}"

    # PostgreSQL refuses to run as root: as root, its programs run as the postgres account.
    def _as_postgres(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str]) -> None:
        import subprocess

        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(argv[:3])}… failed ({done.returncode}): {done.stderr[-1500:]}{tail}")

    def _init(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.engine == "postgresql":
            self._run(self._as_postgres(["initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                                         "--no-sync", "-E", "UTF8"]))
        else:
            self._run(["mariadb-install-db", "--no-defaults", f"--datadir={self.data}", "--user=root",
                       "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"])

    def start(self, timeout: float = 60) -> None:
        import subprocess
        import time

        if _reachable("127.0.0.1", self.port):
            # A server left by an earlier run (one stopped by SIGTERM or SIGKILL before its cleanup)
            # or anyone else: starting on top of it would talk to that one, or wait for an answer
            # it never gives.
            raise RuntimeError(f"127.0.0.1:{self.port} is already taken (a server left running by an earlier "
                               "run?): stop it or choose another port")
        first = not self.data.exists()
        if first:
            self._init()
        if self.engine == "postgresql":
            options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} -c fsync=off "
                       "-c full_page_writes=off -c shared_buffers=16MB -c max_connections=60")
            self._run(self._as_postgres(["pg_ctl", "-D", str(self.data), "-o", options, "-l",
                                         str(self.directory / "server.log"), "-w", "-t", str(int(timeout)),
                                         "start"]))
        else:
            log = open(self.directory / "server.log", "ab")  # noqa: SIM115 - the server's lifetime
            self.process = subprocess.Popen(
                ["mariadbd", "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
                 "--bind-address=127.0.0.1", f"--socket={self.directory}/mysqld.sock",
                 f"--pid-file={self.directory}/mysqld.pid", "--user=root", "--skip-name-resolve",
                 "--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=2", "--max-connections=60"],
                stdout=log, stderr=log, start_new_session=True)
            log.close()
        deadline = time.monotonic() + timeout
        while not _reachable("127.0.0.1", self.port):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"mariadbd exited ({self.process.returncode}); see {self.directory}/server.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.engine} did not listen on {self.port} in {timeout:.0f} s")
            time.sleep(0.1)
        if first:
            admin = sa.create_engine(SERVERS[self.engine][2].split("127.0.0.1:")[0]
                                     + f"127.0.0.1:{self.port}/" + ("postgres" if self.engine == "postgresql"
                                                                    else "mysql"), isolation_level="AUTOCOMMIT",
                                  connect_args={"connect_timeout": 30})
            with admin.connect() as conn:
                if self.engine == "postgresql":
                    conn.exec_driver_sql("CREATE DATABASE openkeel")
                else:
                    conn.exec_driver_sql("CREATE DATABASE openkeel CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            admin.dispose()

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server (fast shutdown; ``kill``: SIGKILL, a crash) and wait until it no longer listens."""
        import signal
        import time

        if self.engine == "postgresql":
            if not (self.data / "postmaster.pid").exists():
                return
            if kill:
                # A crash of the whole server: the postmaster and every backend, at once.
                pid = int((self.data / "postmaster.pid").read_text().split()[0])
                victims = [pid, *_children(pid)]
                for victim in victims:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(victim, signal.SIGKILL)
                deadline = time.monotonic() + 30
                while any(_alive(victim) for victim in victims) and time.monotonic() < deadline:
                    time.sleep(0.05)
            else:
                self._run(self._as_postgres(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"]))
        elif self.process is not None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.process.wait(timeout=60)
            self.process = None
        deadline = time.monotonic() + 30
        while _reachable("127.0.0.1", self.port) and time.monotonic() < deadline:
            time.sleep(0.1)
        if kill and self.engine == "postgresql":  # what a crashed postmaster leaves behind
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            for lock in self.directory.glob(".s.PGSQL.*"):
                lock.unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete the server's files (after ``stop``)."""
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self) -> None:
        self.stop(kill=True)

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def own_database_server(engine: str, directory, port: int | None = None):
    """Yield a started ``OwnServer`` (a free port unless ``port``); it is stopped and killed afterwards."""
    server = OwnServer(engine, directory, port or free_port())
    try:
        server.start()
        yield server
    finally:
        from openkeel_compute.db import api as db_api

        db_api.dispose_all()
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - a stuck shutdown is finished by SIGKILL
            server.stop(kill=True)
        server.remove()


# -- One migrated database per engine for a whole run, emptied after each test ---------------------------
#
# Creating and migrating a database costs ~1.4 s on PostgreSQL and MariaDB (~0.2 s on SQLite): per test,
# that would double or treble the API suites. ``migrated_database`` hands out one database per server
# engine, migrated once, and after each use puts it back as the migrations left it (every table emptied,
# counters restarted, the migrations' own rows written again). SQLite gets a new file each time.

_MIGRATED: dict[str, tuple[str, dict[str, list[dict]]]] = {}


def _drop_migrated() -> None:
    for engine, (url, _seed) in list(_MIGRATED.items()):
        name = sa.engine.make_url(url).database
        admin = sa.create_engine(SERVERS[engine][2].format(db="postgres" if engine == "postgresql" else "mysql"),
                                 isolation_level="AUTOCOMMIT")
        with contextlib.suppress(Exception), admin.connect() as conn:
            if engine == "postgresql":
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
    _MIGRATED.clear()


def _first_use(engine: str) -> tuple[str, dict[str, list[dict]]]:
    import atexit

    from openkeel_compute.db import migration

    host, port, template = SERVERS[engine]
    if not _reachable(host, port):
        _unavailable(engine)
    name = f"openkeel_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(template.format(db="postgres" if engine == "postgresql" else "mysql"),
                             isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if engine == "postgresql":
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        else:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    admin.dispose()
    if not _MIGRATED:
        atexit.register(_drop_migrated)
    url = template.format(db=name)
    db = sa.create_engine(url)
    try:
        migration.sync(db)
        meta = sa.MetaData()
        meta.reflect(db)
        with db.connect() as conn:
            seed = {table.name: [dict(row._mapping) for row in conn.execute(sa.select(table))]
                    for table in meta.sorted_tables if table.name != "alembic_version"}
    finally:
        db.dispose()
    _MIGRATED[engine] = (url, seed)
    return _MIGRATED[engine]


def _empty(engine: str, url: str, seed: dict[str, list[dict]]) -> None:
    """Put the database back as the migrations left it: the tables the test touched (rows, or a counter
    moved) emptied with their counters restarted, the migrations' rows written again."""
    tables = list(seed)
    name = sa.engine.make_url(url).database
    db = sa.create_engine(url)
    try:
        with db.begin() as conn:
            quote = (lambda t: f'"{t}"') if engine == "postgresql" else (lambda t: f"`{t}`")
            having = conn.exec_driver_sql(" UNION ALL ".join(
                f"SELECT '{t}' FROM {quote(t)} HAVING COUNT(*) > 0" for t in tables)).scalars().all()
            touched = set(having) | {t for t, rows in seed.items() if rows}
            if engine == "postgresql":
                # a test's thread still holding a lock would make TRUNCATE wait for ever
                conn.exec_driver_sql("SET LOCAL lock_timeout = '20s'")
                moved = {row[0] for row in conn.exec_driver_sql(
                    "SELECT c.relname FROM pg_class c JOIN pg_depend d ON d.refobjid = c.oid "
                    "JOIN pg_sequences s ON s.sequencename = (SELECT relname FROM pg_class WHERE oid = d.objid) "
                    "WHERE c.relkind = 'r' AND s.last_value IS NOT NULL")}
                touched |= moved & set(tables)
                if touched:
                    conn.exec_driver_sql("TRUNCATE " + ", ".join(quote(t) for t in tables if t in touched)
                                         + " RESTART IDENTITY CASCADE")
            else:
                conn.exec_driver_sql("SET SESSION lock_wait_timeout = 20")
                touched |= {row[0] for row in conn.exec_driver_sql(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                    "AND auto_increment > 1", (name,))}
                conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 0")
                for table in tables:
                    if table in touched:
                        conn.exec_driver_sql(f"TRUNCATE TABLE `{table}`")
                conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 1")
            meta = sa.MetaData()
            for table, rows in seed.items():
                if rows:
                    conn.execute(sa.Table(table, meta, autoload_with=conn).insert(), rows)
    finally:
        db.dispose()


@contextlib.contextmanager
def migrated_database(engine: str, tmp_path):
    """Yield the URL of a migrated database on ``engine`` holding only what the migrations write.

    SQLite: a new file. PostgreSQL, MariaDB: the run's one database of that engine, emptied afterwards
    (a test must not keep using it after its end: every engine of ``openkeel_compute.db.api`` is disposed).
    """
    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import migration

    if engine == "sqlite":
        url = f"sqlite:///{tmp_path}/openkeel-{uuid.uuid4().hex[:8]}.sqlite"
        db = sa.create_engine(url)
        migration.sync(db)
        db.dispose()
        yield url
        return
    url, seed = _MIGRATED.get(engine) or _first_use(engine)
    try:
        yield url
    finally:
        db_api.dispose_all()
        try:
            _empty(engine, url, seed)
        except Exception:  # a database that cannot be emptied is replaced
            _MIGRATED.pop(engine, None)
            raise
