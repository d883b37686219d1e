"""scripts/serve's supervisor: the API, the controller and the development image service as one command.

Arguments: the --config-file options of scripts/serve (its embedded defaults first), then ``--``, then
the user's arguments for ``openkeel-compute serve`` (--port, --host, ...).

- The image service: when neither ``[glance] api_servers`` nor ``[glance] endpoint_override`` is set,
  the local development image service (openkeel_compute.images.local) runs in this process on
  127.0.0.1:9292 (another free port when 9292 is taken; OPENKEEL_IMAGE_PORT chooses another), serving ``$state_path/images`` with the
  image ``openkeel-tiny`` registered on first start. Its address reaches the API and the controller in
  ``$state_path/serve-images.conf``, the last --config-file they get. With a Glance configured, nothing
  of this runs and that Glance is used.
- Placement: when ``[placement]`` names no credentials, Placement's own service (openstack-placement,
  ``openkeel_compute.placement.embedded``) runs as a child process on a free loopback port with its SQLite
  database in ``$state_path/placement``; ``$state_path/serve-placement.conf`` points the API and the
  controller at it.
- The controller (``openkeel-compute controller``: its built-in KubeVirt cluster unless a kubeconfig is
  configured) and the API (``openkeel-compute serve``) run as child processes, each leading its own
  process group, and die with this process (PR_SET_PDEATHSIG).
- SIGINT (Ctrl-C) or SIGTERM stops both groups (SIGTERM, then SIGKILL after 10 s) and exits 0; when one
  child exits by itself, the other is stopped and this exits with the child's status.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

SCRIPTS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import _clouds_yaml

from openkeel_compute import signals
from openkeel_compute.conf import build_conf
from openkeel_compute.images import glance, local
from openkeel_compute.placement import client as placement_client
from openkeel_compute.placement import embedded

# The local image service's port: Glance's 9292, or OPENKEEL_IMAGE_PORT (0: any free port).
IMAGE_PORT = int(os.environ.get("OPENKEEL_IMAGE_PORT", "9292"))
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


def _bind_images(directory: pathlib.Path):
    """The local image service, bound (its port known) but not serving yet: no thread runs before the forks."""
    local.ensure_default_image(directory)
    try:
        return local.serve(str(directory), "127.0.0.1", IMAGE_PORT)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        return local.serve(str(directory), "127.0.0.1", 0)


def _stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{child.args[1]} did not stop in {STOP_TIMEOUT:.0f} s: killed")
        # the whole group: workers of the API, anything a child left behind
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


def main(argv: list[str]) -> int:
    split = argv.index("--")
    config_files, serve_args = argv[:split], argv[split + 1:]
    conf = build_conf(config_files)
    glance.register_opts(conf)
    config = list(config_files)
    image_url = None
    images = None
    if conf.glance.api_servers or conf.glance.endpoint_override:
        say("image service: " + ", ".join(conf.glance.api_servers or [conf.glance.endpoint_override])
            + " ([glance] in the configuration)")
    else:
        state = pathlib.Path(conf.state_path)
        images = _bind_images(state / "images")
        image_url = f"http://127.0.0.1:{images.server_port}"
        extra = state / "serve-images.conf"
        extra.write_text("# Written by scripts/serve at each start: its local image service.\n"
                         f"[glance]\napi_servers = {image_url}\n")
        config += ["--config-file", str(extra)]
        say(f"image service: the local development one on {image_url}, images in {state / 'images'} "
            f"(image {local.DEFAULT_IMAGE_NAME} is there)")
    placement = None
    placement_client.register_opts(conf)
    if placement_client.configured(conf):
        say("placement: [placement] in the configuration")
    else:
        state = pathlib.Path(conf.state_path)
        placement = embedded.start(state / "placement", start_new_session=True, preexec_fn=_die_with_parent)
        extra = state / "serve-placement.conf"
        extra.write_text("# Written by scripts/serve at each start: its embedded Placement.\n"
                         + embedded.config_lines(placement.url))
        config += ["--config-file", str(extra)]
        say(f"placement: the embedded one on {placement.url}, its database in {state / 'placement'}")
    _clouds_yaml.main([str(pathlib.Path(conf.state_path) / "clouds.yaml"), *config, *serve_args])

    exe = str(pathlib.Path(sys.executable).parent / "openkeel-compute")
    stopping = threading.Event()

    signal.signal(signal.SIGINT, signals.setter(stopping))
    signal.signal(signal.SIGTERM, signals.setter(stopping))
    children: list[subprocess.Popen] = []
    serving = None
    try:
        for command in ([exe, "controller", *config], [exe, "serve", *config, *serve_args]):
            if stopping.is_set():
                break
            # preexec_fn is safe here: the process has no other thread yet (the image service starts below).
            children.append(subprocess.Popen(command, start_new_session=True,
                                             preexec_fn=_die_with_parent))  # noqa: PLW1509
        serving = None
        if images is not None:
            serving = threading.Thread(target=images.serve_forever, name="images", daemon=True)
            serving.start()
        status = 0
        while not stopping.is_set():
            ended = [child for child in children if child.poll() is not None]
            if ended:
                status = ended[0].returncode or 1
                say(f"`openkeel-compute {ended[0].args[1]}` exited with status {ended[0].returncode}: "
                    "stopping the rest")
                break
            stopping.wait(0.2)
        return status
    finally:
        _stop(children)
        if placement is not None:
            placement.stop()
        if images is not None:
            if serving is not None:
                images.shutdown()
            images.server_close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
