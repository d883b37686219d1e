"""[database] options (the names oslo.db and Nova use)."""

from oslo_config import cfg

from openkeel_compute.conf import groups

database_group = cfg.OptGroup("database", title="Database options")

DATABASE_OPTS = [
    cfg.StrOpt(
        "connection",
        secret=True,
        sample_default="sqlite:///$state_path/openkeel.sqlite",
        help="SQLAlchemy URL of the database. Unset: a SQLite file under [DEFAULT] state_path. "
        "PostgreSQL: postgresql+psycopg://user@host/db; MariaDB: mysql+pymysql://user@host/db.",
    ),
    cfg.IntOpt("max_pool_size", default=10, help="Connections kept open per process (not SQLite)."),
    cfg.IntOpt("max_overflow", default=20, help="Extra connections allowed past max_pool_size."),
    cfg.IntOpt("pool_timeout", default=30, help="Seconds to wait for a pooled connection."),
    cfg.BoolOpt("connection_debug", default=False, help="Log every SQL statement."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(groups.own(database_group))
    conf.register_opts(DATABASE_OPTS, group=database_group)


def list_opts():
    return [(database_group.name, DATABASE_OPTS)]
