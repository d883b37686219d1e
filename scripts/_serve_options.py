"""scripts/serve's command line, and the ports it opens.

Every option scripts/serve accepts is here, and ``--help`` shows them all: its own (the ports of the
image service, the embedded Placement, the built-in cluster, the console proxy, the metadata service and the
controller's
metrics), the API's
(``openkeel-compute serve``: --host, --port, --workers, --server) and --config-file, which the schema
sync, the API and the controller all read. ``ports(conf, args)`` lists the ports a start will take,
each with the option that moves it.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import pathlib
import socket

from openkeel_compute.cmd.common import ArgumentParser, OperatorError, port_number, positive_int

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULTS = ROOT / "etc" / "openkeel-compute-serve.conf"
IMAGE_PORT = 9292  # Glance's
CONSOLE_PORT = 6080  # nova-novncproxy's


def port_or_any(text: str) -> int:
    """A TCP port, or 0 (any free one; for --metrics-port: none)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port number (0-65535)")
    return port


class _ConfigFile(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        if not values or values.startswith("-"):
            parser.exit(2, "error: --config-file needs a value: the path of a configuration file\n")
        namespace.config_file.append(values)


class _Parser(ArgumentParser):
    def error(self, message: str):
        if "--config-file" in message and "expected one argument" in message:
            self.exit(2, "error: --config-file needs a value: the path of a configuration file\n")
        super().error(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="scripts/serve",
        description="OpenKeel compute for development, with nothing else installed: the compute API, the "
                    "controller on its built-in KubeVirt cluster, Placement's own service and the local "
                    "image service, until Ctrl-C. Embedded defaults: etc/openkeel-compute-serve.conf (SQLite "
                    "under ./var/, noauth2 on 127.0.0.1). Every port it takes has an option below; a busy "
                    "port stops it before anything starts.")
    p.add_argument("--config-file", action=_ConfigFile, default=[], metavar="FILE",
                   help="a configuration file read after the embedded defaults, by the API, the controller and "
                        "the schema sync (repeat it: later files win)")
    api = p.add_argument_group("the compute API (openkeel-compute serve)")
    api.add_argument("--host", help="listen address (default: [wsgi] host, 127.0.0.1)")
    api.add_argument("--port", type=port_number, help="listen port (default: [wsgi] port, 8774)")
    api.add_argument("--workers", type=positive_int, help="worker processes (default: [wsgi] workers)")
    api.add_argument("--server", choices=["granian", "gunicorn"], help="default: [wsgi] server")
    ports = p.add_argument_group("the other services' ports (on 127.0.0.1)")
    ports.add_argument("--image-port", type=port_or_any, default=IMAGE_PORT, metavar="PORT",
                       help=f"the local image service (default: {IMAGE_PORT}; 0: any free port; not started when "
                            "[glance] names an image service)")
    ports.add_argument("--placement-port", type=port_or_any, default=0, metavar="PORT",
                       help="the embedded Placement (default: 0, any free port; not started when [placement] "
                            "is configured)")
    ports.add_argument("--emulator-port", type=port_or_any, metavar="PORT",
                       help="the built-in KubeVirt cluster's API server, for kubectl (default: [controller] "
                            "emulator_port; 0: any free port; not started with a [controller] kubeconfig)")
    ports.add_argument("--console-port", type=port_or_any, default=CONSOLE_PORT, metavar="PORT",
                       help=f"the console proxy (openkeel-compute console-proxy: noVNC's page and the VNC and "
                            f"serial console websockets; default: {CONSOLE_PORT}; 0: any free port)")
    ports.add_argument("--metadata-port", type=port_or_any, default=0, metavar="PORT",
                       help="the metadata service (openkeel-compute metadata: the guests' OpenStack and EC2 "
                            "metadata; default: 0, any free port; Nova's is 8775)")
    ports.add_argument("--metrics-port", type=port_or_any, metavar="PORT",
                       help="the controller's Prometheus endpoint (default: [controller] metrics_port: none in "
                            "the embedded defaults; 0: none)")
    return p


def api_arguments(args: argparse.Namespace) -> list[str]:
    """The options for ``openkeel-compute serve`` that were given."""
    out: list[str] = []
    for name in ("host", "port", "workers", "server"):
        value = getattr(args, name)
        if value is not None:
            out += [f"--{name}", str(value)]
    return out


@dataclasses.dataclass
class Port:
    """A port a start takes: ``number`` 0 until the service has one."""

    what: str
    host: str
    number: int
    option: str
    zero: str = ""  # what 0 means for the option, when it takes 0

    def reach(self) -> str:
        """The address to connect to: a wildcard address is reached on loopback."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host

    def url(self) -> str:
        host = self.reach()
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.number}"


def api_port(conf, args) -> Port:
    return Port("the compute API", args.host or conf.wsgi.host, args.port or conf.wsgi.port, "--port")


def check_free(ports: list[Port]) -> None:
    """OperatorError (one line) when two services were given one port, or a given port is in use.

    Each port is bound without SO_REUSEPORT and closed again: a port someone listens on refuses the bind.
    """
    seen: dict[int, Port] = {}
    for port in ports:
        if port.number in seen:
            other = seen[port.number]
            raise OperatorError(f"{port.option} {port.number} is also the port of {other.what} ({other.option}): "
                                "give each its own")
        if port.number:
            seen[port.number] = port
    for port in ports:
        if port.number:
            _bind_test(port)


def _bind_test(port: Port) -> None:
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(port.host, port.number, type=socket.SOCK_STREAM,
                                                                  flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise OperatorError(f"cannot listen on {port.host} for {port.what}: {exc.strerror}") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no obstacle
        try:
            sock.bind(address)
            sock.listen(1)
        except OSError as exc:
            raise OperatorError(busy(port) if exc.errno == errno.EADDRINUSE else
                                f"cannot listen on {port.host} port {port.number} for {port.what}: "
                                f"{exc.strerror}") from None


def busy(port: Port) -> str:
    zero = f"; {port.option} 0: {port.zero}" if port.zero else ""
    return (f"port {port.number} on {port.host} is already in use: {port.what} cannot listen there (stop the other "
            f"server, or choose another port with {port.option}{zero})")


def any_free_port(host: str) -> int:
    """A port nobody listens on now, for a service that must be told its port before it starts."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
