"""Shared bits of the command line: --config-file, logging, and the operator's one-line errors.

A command that meets something the operator has to fix (a configuration file, a value, a
database or cluster it cannot reach) raises ``OperatorError``; ``cmd/main.py`` prints it as one
``error: …`` line on stderr and exits non-zero. ``operator_message()`` gives the same line for the
library exceptions that mean the same thing (oslo.config, SQLAlchemy, Kubernetes, files), so
commands need no try/except of their own. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from openkeel_compute.conf import build_conf


class OperatorError(Exception):
    """Something the operator has to fix: printed as ``error: <message>``, exit ``status``."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors as one ``error:`` line (status 2, as argparse has it)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def port_number(text: str) -> int:
    """argparse type of a TCP port to listen on (1-65535)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port number (1-65535)")
    return port


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (workers)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return value


def add_config_args(parser, default=None) -> None:
    parser.add_argument("--config-file", action="append", default=[] if default is None else default,
                        metavar="FILE",
                        help="oslo.config file(s); later files override earlier ones")


def load_conf(args, validate: bool = True):
    """Parse the --config-file options; with ``validate``, every option's value is checked now.

    oslo.config checks a value (type, choices, range) only when it is read: a wrong value would
    otherwise surface as a traceback in the middle of a command, or in a server's worker.
    """
    argv: list[str] = []
    for path in args.config_file:
        argv += ["--config-file", path]
    conf = build_conf(argv)
    if validate:
        validate_values(conf)
    setup_logging(conf.debug)
    return conf


def validate_values(conf) -> None:
    """Read every registered option once; the first invalid value raises OperatorError."""
    from oslo_config import cfg

    def _read(group, name):
        try:
            return (conf[group] if group else conf)[name]
        except cfg.ConfigFileValueError as exc:
            section = group or "DEFAULT"
            # oslo.config names the file in its message only (reading the location reads the value)
            found = re.search(r"detail='([^']+)'", str(exc))
            where = f" in {found.group(1)}" if found else ""
            reason = str(exc).split(" is not valid: ", 1)[-1]
            raise OperatorError(f"[{section}] {name}{where}: {reason}") from None

    for name in list(conf):
        value = _read(None, name)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt in list(value):
                _read(name, opt)


def operator_message(exc: BaseException) -> str | None:
    """The one line that tells the operator what to fix, or None when ``exc`` is a bug."""
    if isinstance(exc, OperatorError):
        return str(exc)
    module = type(exc).__module__ or ""
    if module.startswith("oslo_config"):
        return _config_message(exc)
    if module.startswith("sqlalchemy"):
        return database_message(exc)
    if module.startswith("alembic"):  # a revision this release does not know (--revision, a newer schema)
        return f"database schema: {_first_line(exc)} (`openkeel-compute db version` shows the database's revision)"
    if module.startswith(("httpx", "lightkube")):
        return f"Kubernetes: {_first_line(exc)}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _config_message(exc: BaseException) -> str:
    from oslo_config import cfg

    if isinstance(exc, cfg.ConfigFilesNotFoundError):
        return f"configuration file not found: {', '.join(exc.config_files)} (check --config-file)"
    if isinstance(exc, cfg.ConfigFileParseError):
        return f"cannot parse configuration file {exc.config_file}: {exc.msg}"
    if isinstance(exc, cfg.ConfigFilesPermissionDeniedError):
        return f"cannot read configuration file {', '.join(exc.config_files)}: permission denied"
    return f"configuration: {_first_line(exc)}"


def database_message(exc: BaseException, url: str | None = None) -> str:
    """One line for a SQLAlchemy error: what failed, without the SQL and the background link."""
    from sqlalchemy import exc as sa_exc

    where = f" {url}" if url else ""
    if isinstance(exc, sa_exc.ArgumentError | sa_exc.NoSuchModuleError):
        return f"[database] connection is not a usable database URL: {_first_line(exc)}"
    if isinstance(exc, sa_exc.DBAPIError):
        reason = _first_line(exc.orig) if exc.orig is not None else _first_line(exc)
        if exc.connection_invalidated or isinstance(exc, sa_exc.OperationalError):
            return f"cannot use the database{where}: {reason} (check [database] connection and that the server is up)"
        return f"database{where}: {reason}"
    return f"database{where}: {_first_line(exc)}"


LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"


def setup_logging(debug: bool) -> None:
    """Log to stderr, every line escaped (logsafe: nothing a client sends can start a line of its own)."""
    from openkeel_compute import logsafe

    logsafe.install()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logsafe.SafeFormatter(LOG_FORMAT))
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=[handler])
    # httpx logs every Kubernetes request at INFO: several a second from a running controller.
    for noisy in ("stevedore", "keystoneauth", "urllib3", "amqp", "kombu", "alembic.runtime.plugins", "httpx",
                  "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class NoDatabase(OperatorError):
    """The configured SQLite file does not exist (only ``db sync`` and ``serve`` create one)."""


def database_url(conf) -> str:
    """[database] connection, or the SQLite file under [DEFAULT] state_path; nothing is created."""
    return conf.database.connection or "sqlite:///" + os.path.join(conf.state_path, "openkeel.sqlite")


def open_database(conf, *, create: bool = False):
    """The engine of ``conf``'s database, after saying on stderr which database that is.

    A SQLite file that does not exist is refused (``NoDatabase``) unless ``create``: a command
    run from the wrong directory must not leave an empty database behind and report on it.
    """
    from sqlalchemy.engine import make_url

    from openkeel_compute.db import api as db_api

    parsed = make_url(database_url(conf))
    path = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if path and path != ":memory:":
        path = os.path.abspath(path)
        parsed = parsed.set(database=path)
    print(f"database: {parsed.render_as_string(hide_password=True)}", file=sys.stderr)
    if path and path != ":memory:" and not os.path.exists(path):
        if not create:
            raise NoDatabase(f"no database at {path}: run 'openkeel-compute db sync' with the same "
                             "--config-file first, or point [database] connection or [DEFAULT] state_path at "
                             "an existing one")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return db_api.get_engine(conf)


def refusing_missing_database(func):
    """Wrap a command: a ``NoDatabase`` becomes one ``error:`` line and exit status 1."""

    def run(args) -> int:
        try:
            return func(args)
        except NoDatabase as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run
