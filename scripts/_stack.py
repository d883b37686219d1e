"""scripts/serve's supervisor: the API, the controller, Placement and the image service as one command.

Arguments: scripts/serve's own (scripts/_serve_options.py; ``--help`` lists every one). A start goes:

1. The configuration: the embedded defaults (etc/openkeel-compute-serve.conf), then each --config-file.
2. The state path (``[DEFAULT] state_path``, ./var) is taken: ``serve.lock`` there is held while this
   runs, so a second scripts/serve on the same state path stops with one line and changes nothing.
3. Every port the start will take is checked free; a busy one stops it with one line naming the option
   that moves it (the API's --port, --image-port, --placement-port, --emulator-port, --console-port,
   --metadata-port, --metrics-port).
4. The database: scripts/_database.py brings the schema to head and writes devstack's flavors into a
   new database of the embedded defaults.
5. The services: the local development image service (openkeel_compute.images.local, in this process,
   unless ``[glance] api_servers`` or ``endpoint_override`` names one; the image ``openkeel-tiny`` is
   registered on first start), Placement's own service (``openkeel_compute.placement.embedded``, a child
   process, unless ``[placement]`` names credentials), then the controller (``openkeel-compute
   controller``: its built-in KubeVirt cluster unless a kubeconfig is configured), the console proxy
   (``openkeel-compute console-proxy``, on --console-port, noVNC from Debian's novnc package), the
   metadata service (``openkeel-compute metadata``, on --metadata-port) and the API
   (``openkeel-compute serve``). ``$state_path/serve-images.conf``, ``serve-placement.conf``,
   ``serve-consoles.conf`` (the console URLs and the proxy's port), ``serve-metadata.conf`` and
   ``serve-controller.conf``, rewritten at each start, are their last --config-files: where the image
   service and Placement are, the ports of the built-in cluster and of the metrics.
6. Once the API answers and the controller listens: one line per port taken, ``$state_path/clouds.yaml`` written (never before:
   a start that fails leaves the previous one's file as it was), and "ready".

Children lead their own process groups and die with this process (PR_SET_PDEATHSIG). SIGINT (Ctrl-C)
or SIGTERM stops them all (SIGTERM, then SIGKILL after 10 s) and exits 0; when one child exits by
itself, the others are stopped and this exits with the child's status.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

SCRIPTS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import _clouds_yaml
import _serve_options as options

from openkeel_compute import signals
from openkeel_compute.cmd.common import OperatorError, operator_message, validate_values
from openkeel_compute.conf import build_conf
from openkeel_compute.consoles import novnc
from openkeel_compute.images import glance, local
from openkeel_compute.placement import client as placement_client
from openkeel_compute.placement import embedded

STOP_TIMEOUT = 10.0
_PR_SET_PDEATHSIG = 1


def say(text: str) -> None:
    print(f"serve: {text}", file=sys.stderr, flush=True)


_SUPERVISOR = os.getpid()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the supervisor dies, whatever kills it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != _SUPERVISOR:  # it died between the fork and the line above: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)


def _shown(path: pathlib.Path | str) -> str:
    """A path as the operator typed it: relative to the working directory when under it."""
    path = os.path.abspath(path)
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _take(state: pathlib.Path):
    """Hold ``state/serve.lock`` for as long as this process lives; OperatorError when another holds it."""
    state.mkdir(parents=True, exist_ok=True)
    handle = open(state / "serve.lock", "a+")  # noqa: SIM115 (kept open: the lock is the open file)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise OperatorError(f"another scripts/serve is running on the state path {_shown(state)} (process {holder}):"
                            " stop it first, or give this one a state path of its own ([DEFAULT] state_path in a "
                            "--config-file)") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def _listens(port: options.Port) -> bool:
    try:
        with socket.create_connection((port.reach(), port.number), timeout=1):
            return True
    except OSError:
        return False


def _stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{child.args[1]} did not stop in {STOP_TIMEOUT:.0f} s: killed")
        # the whole group: workers of the API, anything a child left behind
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


class Start:
    """What one start takes and writes: its ports, the image service, Placement, the extra --config-files."""

    def __init__(self, conf, args, config: list[str]) -> None:
        self.conf, self.args = conf, args
        self.state = pathlib.Path(conf.state_path)
        self.config = list(config)
        self.controller_config: list[str] = []
        c = conf.controller
        self.api = options.api_port(conf, args)
        self.images = None
        self.image_port = None
        if not (conf.glance.api_servers or conf.glance.endpoint_override):
            self.image_port = options.Port("the local image service", "127.0.0.1", args.image_port, "--image-port",
                                           "any free port")
        self.placement = None
        self.placement_port = None
        if not placement_client.configured(conf):
            self.placement_port = options.Port("the embedded Placement", "127.0.0.1", args.placement_port,
                                               "--placement-port", "any free port")
        self.emulator_port = None
        if not c.kubeconfig and c.driver != "kubernetes":
            number = c.emulator_port if args.emulator_port is None else args.emulator_port
            self.emulator_port = options.Port("the built-in KubeVirt cluster", c.emulator_host, number,
                                              "--emulator-port", "any free port")
        self.console_port = options.Port("the console proxy", "127.0.0.1", args.console_port, "--console-port",
                                         "any free port")
        self.metadata_port = options.Port("the metadata service", "127.0.0.1", args.metadata_port,
                                          "--metadata-port", "any free port")
        metrics = c.metrics_port if args.metrics_port is None else args.metrics_port
        self.metrics_port = (options.Port("the controller's metrics", c.metrics_host, metrics, "--metrics-port",
                                          "none") if metrics else None)

    def up(self) -> bool:
        """The API answers, and the controller listens on its ports (the built-in cluster's, the metrics')."""
        return (_answers(self.api.url() + "/")
                and all(_listens(p) for p in (self.emulator_port, self.metrics_port, self.console_port,
                                              self.metadata_port) if p is not None))

    def ports(self) -> list[options.Port]:
        return [p for p in (self.api, self.image_port, self.placement_port, self.emulator_port, self.console_port,
                            self.metadata_port, self.metrics_port) if p is not None]

    def open_services(self, stopping: threading.Event) -> None:
        """The image service bound (serving starts later, after the forks) and Placement started."""
        if self.image_port is None:
            say("image service: " + ", ".join(self.conf.glance.api_servers or [self.conf.glance.endpoint_override])
                + " ([glance] in the configuration)")
        else:
            local.ensure_default_image(self.state / "images")
            try:
                self.images = local.serve(str(self.state / "images"), "127.0.0.1", self.image_port.number)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise OperatorError(options.busy(self.image_port)) from None
                raise
            self.image_port.number = self.images.server_port
            self._write("serve-images.conf", "its local image service",
                        f"[glance]\napi_servers = {self.image_port.url()}\n")
        if self.placement_port is None:
            say("placement: [placement] in the configuration")
        elif not stopping.is_set():
            try:
                self.placement = embedded.start(self.state / "placement", port=self.placement_port.number,
                                                start_new_session=True, preexec_fn=_die_with_parent)
            except RuntimeError as exc:
                raise OperatorError(str(exc)) from None
            self.placement_port.number = int(self.placement.url.rsplit(":", 1)[1])
            self._write("serve-placement.conf", "its embedded Placement", embedded.config_lines(self.placement.url))
        if self.emulator_port is not None and not self.emulator_port.number:
            self.emulator_port.number = options.any_free_port(self.emulator_port.host)
        if not self.console_port.number:
            self.console_port.number = options.any_free_port(self.console_port.host)
        console = self.console_port.url()
        self._write("serve-consoles.conf", "its console proxy",
                    f"[vnc]\nnovncproxy_host = {self.console_port.host}\n"
                    f"novncproxy_port = {self.console_port.number}\n"
                    f"novncproxy_base_url = {console}/vnc_auto.html\n[serial_console]\n"
                    f"serialproxy_host = {self.console_port.host}\nserialproxy_port = {self.console_port.number}\n"
                    f"base_url = ws://{self.console_port.reach()}:{self.console_port.number}/\n")
        if not self.metadata_port.number:
            self.metadata_port.number = options.any_free_port(self.metadata_port.host)
        self._write("serve-metadata.conf", "its metadata service",
                    f"[DEFAULT]\nmetadata_listen = {self.metadata_port.host}\n"
                    f"metadata_listen_port = {self.metadata_port.number}\n")
        lines = f"metrics_port = {self.metrics_port.number if self.metrics_port else 0}\n"
        if self.emulator_port is not None:
            lines += f"emulator_port = {self.emulator_port.number}\n"
        self.controller_config = self._file("serve-controller.conf", "the controller's ports", "[controller]\n" + lines)

    def _write(self, name: str, what: str, text: str) -> None:
        self.config += self._file(name, what, text)

    def _file(self, name: str, what: str, text: str) -> list[str]:
        path = self.state / name
        path.write_text(f"# Written by scripts/serve at each start: {what}.\n{text}")
        return ["--config-file", str(path)]

    def announce(self) -> None:
        """One line per port taken, with the option that moves it."""
        details = {
            "--port": self.api.url() + "/",
            "--image-port": f"{self.image_port.url()}, images in {_shown(self.state / 'images')}, "
                            f"{local.DEFAULT_IMAGE_NAME} among them" if self.image_port else "",
            "--placement-port": f"{self.placement.url}, its database in {_shown(self.state / 'placement')}"
                                if self.placement else "",
            "--emulator-port": f"{self.emulator_port.url()}, for kubectl --kubeconfig "
                               f"{_shown(self.conf.controller.emulator_kubeconfig)}" if self.emulator_port else "",
            "--metrics-port": self.metrics_port.url() + "/metrics" if self.metrics_port else "",
            "--metadata-port": f"{self.metadata_port.url()}/openstack, the guests' metadata",
            "--console-port": f"{self.console_port.url()}/vnc_auto.html, noVNC from "
                              + (novnc.find(self.conf.vnc.web) or "nowhere: " + novnc.missing_message(self.conf.vnc.web)),
        }
        for port in self.ports():
            say(f"port {port.number} taken by {port.what}: {details[port.option]} (move it with {port.option})")

    def close(self) -> None:
        if self.placement is not None:
            self.placement.stop()
        if self.images is not None:
            self.images.server_close()


def main(argv: list[str]) -> int:
    args = options.parser().parse_args(argv)
    config = ["--config-file", str(options.DEFAULTS)]
    for path in args.config_file:
        config += ["--config-file", path]
    stopping = threading.Event()
    signal.signal(signal.SIGINT, signals.setter(stopping))
    signal.signal(signal.SIGTERM, signals.setter(stopping))
    conf = build_conf(config)
    glance.register_opts(conf)
    placement_client.register_opts(conf)
    validate_values(conf)  # a wrong value is one line naming its option and file, before anything runs
    start = Start(conf, args, config)
    lock = _take(start.state)
    children: list[subprocess.Popen] = []
    serving = None
    try:
        options.check_free(start.ports())
        database = subprocess.run([sys.executable, str(SCRIPTS / "_database.py"), *config], check=False)
        if database.returncode or stopping.is_set():
            return database.returncode
        start.open_services(stopping)
        exe = str(pathlib.Path(sys.executable).parent / "openkeel-compute")
        api_args = options.api_arguments(args)
        for command in ([exe, "controller", *start.config, *start.controller_config],
                        [exe, "console-proxy", *start.config],
                        [exe, "metadata", *start.config],
                        [exe, "serve", *start.config, *api_args]):
            if stopping.is_set():
                break
            # preexec_fn is safe here: the process has no other thread yet (the image service starts below).
            children.append(subprocess.Popen(command, start_new_session=True,
                                             preexec_fn=_die_with_parent))  # noqa: PLW1509
        if start.images is not None:
            serving = threading.Thread(target=start.images.serve_forever, name="images", daemon=True)
            serving.start()
        status, ready = 0, False
        while not stopping.is_set():
            ended = [child for child in children if child.poll() is not None]
            if ended:
                status = ended[0].returncode or 1
                say(f"`openkeel-compute {ended[0].args[1]}` exited with status {ended[0].returncode}: "
                    "stopping the rest")
                break
            if not ready and start.up():
                ready = True
                start.announce()
                _clouds_yaml.main([str(start.state / "clouds.yaml"), *start.config, *api_args])
                say("ready: Ctrl-C stops everything")
            stopping.wait(0.2)
        return status
    finally:
        _stop(children)
        if serving is not None:
            start.images.shutdown()
        start.close()
        lock.close()


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except Exception as exc:  # one line for what the operator has to fix; a bug keeps its traceback
        message = operator_message(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
