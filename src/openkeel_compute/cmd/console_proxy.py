"""``openkeel-compute console-proxy``: the console proxy (nova-novncproxy and nova-serialproxy in one).

    openkeel-compute console-proxy [--config-file FILE ...]

Listens on [vnc] novncproxy_host:novncproxy_port (noVNC's page and its websocket) and, when it differs, on
[serial_console] serialproxy_host:serialproxy_port (serial console websockets); either port takes either
kind of token. Reads the database of [database] connection and reaches the cluster with the controller's
kubeconfig ([controller] kubeconfig, or the built-in cluster's [controller] emulator_kubeconfig).
"""

from __future__ import annotations

import logging
import sys
import threading

from openkeel_compute.cmd.common import add_config_args, load_conf, open_database, refusing_missing_database

LOG = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "console-proxy", help="serve noVNC and relay console websockets to KubeVirt (nova-novncproxy)",
        description="The console proxy: serves noVNC's page for the URLs of `openstack console url show`, "
                    "checks each websocket's token against the database and relays it to the server's VNC or "
                    "serial console subresource in the cluster.")
    add_config_args(parser)
    parser.set_defaults(func=refusing_missing_database(_run))


def build_servers(conf, engine):
    """The listening servers of ``conf`` (one per distinct address), and noVNC's directory or None."""
    from openkeel_compute.consoles import novnc, proxy, upstream

    web = novnc.find(conf.vnc.web)
    addresses = [(conf.vnc.novncproxy_host, conf.vnc.novncproxy_port)]
    serial = (conf.serial_console.serialproxy_host, conf.serial_console.serialproxy_port)
    if serial not in addresses:
        addresses.append(serial)
    servers = [proxy.ConsoleServer(address, engine=engine, kubeconfig=upstream.kubeconfig_path(conf), web=web,
                                   web_missing=novnc.missing_message(conf.vnc.web),
                                   allowed_origins=tuple(conf.console.allowed_origins))
               for address in addresses]
    return servers, web


def _run(args) -> int:
    from openkeel_compute.consoles import novnc

    conf = load_conf(args)
    engine = open_database(conf)
    servers, web = build_servers(conf, engine)
    if web is None:
        print(f"console proxy: warning: {novnc.missing_message(conf.vnc.web)}; VNC consoles cannot be shown "
              "(serial consoles work)", file=sys.stderr)
    for server in servers:
        host, port = server.server_address[:2]
        print(f"console proxy: listening on http://{host}:{port}/ (noVNC from {web or 'nowhere'})", file=sys.stderr)
    threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in servers]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    return 0
