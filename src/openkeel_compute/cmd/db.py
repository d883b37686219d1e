"""`openkeel-compute db sync` and `db version`."""

from __future__ import annotations

from openkeel_compute.cmd.common import add_config_args, load_conf, open_database, refusing_missing_database


def register(subparsers) -> None:
    parser = subparsers.add_parser("db", help="database schema")
    db_sub = parser.add_subparsers(dest="db_command", metavar="ACTION")
    sync = db_sub.add_parser("sync", help="create or upgrade the schema")
    add_config_args(sync)
    sync.add_argument("--revision", default="head", help="target revision (default: head)")
    sync.set_defaults(func=_sync)
    version = db_sub.add_parser("version", help="print the schema revision of the database")
    add_config_args(version)
    version.set_defaults(func=refusing_missing_database(_version))
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _sync(args) -> int:
    from openkeel_compute.db import migration

    conf = load_conf(args)
    migration.sync(open_database(conf, create=True), args.revision)
    return 0


def _version(args) -> int:
    from openkeel_compute.db import migration

    conf = load_conf(args)
    print(migration.current(open_database(conf)) or "None")
    return 0
