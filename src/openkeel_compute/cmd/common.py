"""Shared bits of the command line: --config-file, logging, and the database a command uses."""

from __future__ import annotations

import logging
import os
import sys

from openkeel_compute.conf import build_conf


def add_config_args(parser, default=None) -> None:
    parser.add_argument("--config-file", action="append", default=[] if default is None else default, metavar="FILE",
                        help="oslo.config file(s); later files override earlier ones")


def load_conf(args):
    argv: list[str] = []
    for path in args.config_file:
        argv += ["--config-file", path]
    conf = build_conf(argv)
    setup_logging(conf.debug)
    return conf


def setup_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("stevedore", "keystoneauth", "urllib3", "amqp", "kombu"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class NoDatabase(Exception):
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
