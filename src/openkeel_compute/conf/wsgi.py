"""[wsgi] options: how `openkeel-compute serve` listens."""

from oslo_config import cfg

from openkeel_compute.conf import groups

wsgi_group = cfg.OptGroup("wsgi", title="WSGI server options")

WSGI_OPTS = [
    cfg.HostAddressOpt("host", default="127.0.0.1", help="Address the API listens on."),
    cfg.PortOpt("port", default=8774, help="Port the API listens on (Nova's)."),
    cfg.IntOpt("workers", default=1, min=1, help="API worker processes."),
    cfg.IntOpt(
        "threads",
        default=2,
        min=1,
        help="Request threads per worker. Two keep the core busy while one waits on the database "
        "(SQLite's writer lock or a server round trip); more only add GIL hand-offs, which show "
        "as tail latency (measured in bench/RESULTS.md). Raise it for a database several "
        "milliseconds away, and keep it at most [database] max_pool_size. Scale with workers.",
    ),
    cfg.StrOpt(
        "server",
        default="granian",
        choices=[("granian", "granian's WSGI interface"), ("gunicorn", "gunicorn with gthread workers")],
        help="The WSGI server that runs the API.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(groups.own(wsgi_group))
    conf.register_opts(WSGI_OPTS, group=wsgi_group)


def list_opts():
    return [(wsgi_group.name, WSGI_OPTS)]
