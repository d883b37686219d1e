"""Engines, sessions and transactions.

One engine per process and URL. SQLite gets foreign keys, WAL and a busy timeout so that several
threads (and the controller process) can share the file; server databases get a pool sized by
[database] options. ``transaction()`` is the only way the catalogue writes: one transaction per
API write, committed or rolled back as a whole. Every engine raises the generations of what its
transactions wrote right before they commit (db/generations.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterator

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import Connection
from sqlalchemy.pool import StaticPool

from openkeel_compute.db import generations

LOG = logging.getLogger(__name__)

_ENGINES: dict[str, Engine] = {}
_LOCK = threading.Lock()


def connection_url(conf) -> str:
    """[database] connection, or the embedded default: a SQLite file under [DEFAULT] state_path."""
    url = conf.database.connection
    if url:
        return url
    os.makedirs(conf.state_path, exist_ok=True)
    return "sqlite:///" + os.path.join(conf.state_path, "openkeel.sqlite")


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Let SQLAlchemy, not pysqlite, decide when transactions begin (BEGIN IMMEDIATE below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # Writers take the write lock at BEGIN, so two writers never deadlock upgrading a read
        # lock.
        if not conn.get_execution_options().get("openkeel_readonly"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        # Readers issue no BEGIN: each SELECT is its own snapshot under WAL, which is one round
        # trip less per read; an API read that needs two queries tolerates a write in between.


# A pooled server connection idle for longer than this is pinged before it is handed out.
PING_AFTER_IDLE_SECONDS = 1.0


def _socket_of(dbapi_connection) -> int | None:
    """The file descriptor of a driver connection's socket (psycopg, PyMySQL), or None."""
    fileno = getattr(dbapi_connection, "fileno", None)
    if fileno is None and hasattr(dbapi_connection, "_sock"):  # PyMySQL: no socket once closed
        if dbapi_connection._sock is None:
            return -1
        fileno = dbapi_connection._sock.fileno
    try:
        return fileno() if fileno is not None else None
    except Exception:  # noqa: BLE001 - a closed connection has no socket: treat it as dead
        return -1


def _socket_has_news(dbapi_connection) -> bool:
    """Whether an idle connection's socket is readable: the server closed it, or said something unasked.

    An idle connection has nothing to read, unless the server went away (a restart or a crash closes
    its sockets: end of file, or PostgreSQL's "terminating connection" message first) or sent an
    asynchronous message. One poll() system call, no round trip.
    """
    fd = _socket_of(dbapi_connection)
    if fd is None:
        return False
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


def _ping_idle_connections(engine: Engine, idle_seconds: float) -> None:
    """Liveness without a round trip per request: a pooled connection is pinged only when in doubt.

    pool_pre_ping sends a SELECT 1 at every checkout, a third of the round trips of a flavor show.
    A connection gets the same ping only when it sat idle for a while (a proxy or the server's idle
    timeout may have closed it) or when its socket is readable while idle (a database restart or
    crash closed it: see ``_socket_has_news``). A failed ping makes the pool discard the connection
    and check out another one (a new connection after a restart), so the request that meets a
    connection that died in the pool is served on a live one instead of failing. A disconnect seen
    mid-request still invalidates the whole pool, as always.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection, record):
        record.info["openkeel_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection, record, _proxy):
        since = record.info.pop("openkeel_idle_since", None)
        if since is None:
            return  # a new connection
        if time.monotonic() - since < idle_seconds and not _socket_has_news(dbapi_connection):
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            raise exc.DisconnectionError(f"pooled connection is dead: {error}") from error


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 20, pool_timeout: int = 30,
                echo: bool = False, ping_after_idle: float = PING_AFTER_IDLE_SECONDS) -> Engine:
    if url.startswith("sqlite"):
        kwargs: dict = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, echo=echo, **kwargs)
        _configure_sqlite(engine)
        generations.watch(engine)
        return engine
    engine = create_engine(
        url,
        echo=echo,
        # PostgreSQL's default everywhere. At MariaDB's own default (REPEATABLE READ) a delete also
        # locks the gaps beside the rows it finds, and two transactions replacing the rows of two
        # neighbouring servers (all tags, all metadata) deadlock inserting into each other's gaps.
        isolation_level="READ COMMITTED",
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        pool_recycle=3600,
    )
    _ping_idle_connections(engine, ping_after_idle)
    generations.watch(engine)
    return engine


def get_engine(conf) -> Engine:
    """The process-wide engine for ``conf``'s database."""
    url = connection_url(conf)
    engine = _ENGINES.get(url)
    if engine is None:
        with _LOCK:
            engine = _ENGINES.get(url)
            if engine is None:
                engine = make_engine(
                    url,
                    pool_size=conf.database.max_pool_size,
                    max_overflow=conf.database.max_overflow,
                    pool_timeout=conf.database.pool_timeout,
                    echo=conf.database.connection_debug,
                    ping_after_idle=PING_AFTER_IDLE_SECONDS,
                )
                _ENGINES[url] = engine
    return engine


def dispose_all() -> None:
    with _LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()


# SQLite has one writer at a time. Threads of one process queue here instead of in SQLite's
# busy handler, which sleeps between retries (whole milliseconds of added latency per conflict).
_SQLITE_WRITERS: dict[int, threading.Lock] = {}


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be used now (its server down or unreachable, a connection
    lost, the pool out of connections), rather than refusing a statement: try again later."""
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.TimeoutError):  # no connection from the pool in time
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.connection_invalidated or isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError)
    return False


AFTER_COMMIT = "openkeel_after_commit"


def after_commit(conn: Connection, callback: Callable[[], None], *, key: object = None,
                 first: bool = False) -> None:
    """Run ``callback()`` once ``conn``'s transaction (``transaction()``) has committed; never after a
    rollback. Outside ``transaction()`` it runs at once. Callbacks run in the order given, except that
    one given ``first`` runs before the others of its ``key``. A callback that raises is logged, never
    raised to the writer: what follows a commit (a notification) cannot undo it."""
    callbacks = conn.info.get(AFTER_COMMIT)
    if callbacks is None:
        _run_after_commit([(key, callback)])
        return
    if first:
        for index, (other, _) in enumerate(callbacks):
            if other == key:
                callbacks.insert(index, (key, callback))
                return
    callbacks.append((key, callback))


def _run_after_commit(callbacks: list[tuple[object, Callable[[], None]]]) -> None:
    for _key, callback in callbacks:
        try:
            callback()
        except Exception:
            LOG.exception("A step after a database commit failed")


@contextlib.contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """A connection inside one transaction: committed on success, rolled back on any error."""
    callbacks: list[tuple[object, Callable[[], None]]] = []
    if engine.dialect.name == "sqlite":
        lock = _SQLITE_WRITERS.setdefault(id(engine), threading.Lock())
        with lock, engine.begin() as conn:
            conn.info[AFTER_COMMIT] = callbacks
            try:
                yield conn
            finally:
                conn.info.pop(AFTER_COMMIT, None)
    else:
        with engine.begin() as conn:
            conn.info[AFTER_COMMIT] = callbacks
            try:
                yield conn
            finally:
                conn.info.pop(AFTER_COMMIT, None)
    _run_after_commit(callbacks)


@contextlib.contextmanager
def reader(engine: Engine) -> Iterator[Connection]:
    """A connection for reads: never holds a write lock and costs no BEGIN/ROLLBACK round trips.

    SQLite: no BEGIN (see the begin listener). Database servers: AUTOCOMMIT, set on the driver
    connection without a round trip and reset when the connection goes back to the pool. A read
    of several statements may see a write committed between them, which the API tolerates.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.execution_options(openkeel_readonly=True)
        else:
            conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            yield conn
        finally:
            if engine.dialect.name == "sqlite":
                conn.rollback()


class RawRead:
    """What ``raw_reader`` yields: the dialect and a pooled DB-API connection (``.connection``)."""

    __slots__ = ("connection", "dialect")

    def __init__(self, dialect, connection):
        self.dialect = dialect
        self.connection = connection


@contextlib.contextmanager
def raw_reader(engine: Engine) -> Iterator[RawRead]:
    """A pooled DB-API connection for one-statement reads, without SQLAlchemy's Connection.

    For the hottest reads (a flavor show, an access list): a SQLAlchemy Connection, its execution
    options and events cost more than the statement. Server databases read in AUTOCOMMIT, set on
    the driver connection through the dialect and reset before the connection goes back to the
    pool (a connection whose reset fails is discarded, never pooled in AUTOCOMMIT); SQLite readers
    issue no BEGIN, as with ``reader``.
    """
    dialect = engine.dialect
    proxied = engine.raw_connection()
    server = dialect.name != "sqlite"
    try:
        if server:
            assert proxied.dbapi_connection is not None  # a live pooled connection
            dialect.set_isolation_level(proxied.dbapi_connection, "AUTOCOMMIT")
        yield RawRead(dialect, proxied)
    except dialect.loaded_dbapi.Error as error:
        if dialect.is_disconnect(error, proxied.dbapi_connection, None):
            proxied.invalidate(error)
        raise
    finally:
        if server and proxied.dbapi_connection is not None:
            try:
                dialect.reset_isolation_level(proxied.dbapi_connection)
            except Exception as error:  # noqa: BLE001 - whatever failed, the connection is not reusable
                proxied.invalidate(error)
        proxied.close()
