"""``openkeel-compute metadata``: the metadata service (nova-api-metadata).

    openkeel-compute metadata [--config-file FILE ...]

Listens on [DEFAULT] metadata_listen:metadata_listen_port and answers the guests' metadata requests (the
OpenStack and EC2 documents) from the database of [database] connection (and the EC2 security groups from
Neutron with [neutron]): stateless, as the compute API (docs/metadata.md).
"""

from __future__ import annotations

import logging
import socketserver
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from openkeel_compute.cmd.common import add_config_args, load_conf, open_database, refusing_missing_database

LOG = logging.getLogger(__name__)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:
        LOG.info("%s %s", self.address_string(), format % args)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "metadata", help="serve the guests' metadata (nova-api-metadata)",
        description="The metadata service: the OpenStack and EC2 metadata documents of the server asking, "
                    "identified as Nova's metadata API identifies it (Neutron's metadata proxy headers, or "
                    "the address asking).")
    add_config_args(parser)
    parser.set_defaults(func=refusing_missing_database(_run))


def build_server(conf, engine):
    from openkeel_compute.metadata.service import MetadataApp

    app = MetadataApp.from_conf(conf, engine)
    return make_server(conf.metadata_listen, conf.metadata_listen_port, app, server_class=_Server,
                       handler_class=_Quiet)


def _run(args) -> int:
    conf = load_conf(args)
    engine = open_database(conf)
    server = build_server(conf, engine)
    host, port = server.server_address[:2]
    print(f"metadata: listening on http://{host}:{port}/", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
