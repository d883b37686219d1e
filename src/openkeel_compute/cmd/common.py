"""Shared bits of the command line: --config-file and logging."""

from __future__ import annotations

import logging
import sys

from openkeel_compute.conf import build_conf


def add_config_args(parser) -> None:
    parser.add_argument("--config-file", action="append", default=[], metavar="FILE",
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
