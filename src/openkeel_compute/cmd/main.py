"""The ``openkeel-compute`` command line: one sub-command per module in this package.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (called with the parsed arguments, returns an exit status). What the operator has to fix
ends a command with one ``error:`` line (cmd/common.py: OperatorError, operator_message).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from openkeel_compute.cmd.common import ArgumentParser, operator_message
from openkeel_compute.startup import collector_paused

# Modules that contribute sub-commands, in help order.
COMMAND_MODULES = (
    "openkeel_compute.cmd.serve",
    "openkeel_compute.cmd.db",
    "openkeel_compute.cmd.flavor",
    "openkeel_compute.cmd.extra_specs",
    "openkeel_compute.cmd.controller",
    "openkeel_compute.cmd.console_proxy",
    "openkeel_compute.cmd.metadata",
    "openkeel_compute.cmd.status",
    "openkeel_compute.cmd.placement",
)

# The modules a command needs ("flavor status" comes from the controller's module). Importing
# only those keeps `serve` from loading the mapping, the registry and the Kubernetes client in
# the server's master process.
MODULES_BY_COMMAND = {
    "serve": ("openkeel_compute.cmd.serve",),
    "db": ("openkeel_compute.cmd.db",),
    "flavor": ("openkeel_compute.cmd.flavor", "openkeel_compute.cmd.controller"),
    "extra-specs": ("openkeel_compute.cmd.extra_specs",),
    "controller": ("openkeel_compute.cmd.controller",),
    "console-proxy": ("openkeel_compute.cmd.console_proxy",),
    "metadata": ("openkeel_compute.cmd.metadata",),
    "status": ("openkeel_compute.cmd.status",),
    "placement": ("openkeel_compute.cmd.placement",),
}


def _modules_for(argv: list[str] | None) -> tuple[str, ...]:
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    return MODULES_BY_COMMAND.get(words[0], COMMAND_MODULES) if words else COMMAND_MODULES


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="openkeel-compute",
        description="OpenKeel compute: the OpenStack compute (Nova) API with KubeVirt as the hypervisor.")
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a command module that is not installed
        module.register(subparsers)
    return parser


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked (start-up time)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the installed version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("openkeel-compute")
        except PackageNotFoundError:  # a source tree that was never installed
            found = "unknown (not installed)"
        sys.stdout.write(f"{parser.prog} {found}\n")
        parser.exit()


def _parse(argv: list[str] | None):
    parser = build_parser(_modules_for(argv))
    return parser, parser.parse_args(argv)


def _execute(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except Exception as exc:
        message = operator_message(exc)
        if message is None:
            raise  # a bug: keep the traceback
        sys.stdout.flush()
        print(f"error: {message}", file=sys.stderr)
        return getattr(exc, "status", 1)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv) and run the command; callable many times in one process."""
    return _execute(*_parse(argv))


def run() -> int:
    """The program (the ``openkeel-compute`` console script): ``main()`` as a process's start.

    Importing the command's modules is most of a command's start-up: it runs with the cyclic
    collector paused, and what it built is frozen before the command runs (openkeel_compute.startup).
    """
    with collector_paused():
        parsed = _parse(None)
    try:
        status = _execute(*parsed)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`openkeel-compute extra-specs list | head`): stop quietly, as a
        # command killed by SIGPIPE would, and keep the interpreter's final flush from failing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # 128 + SIGPIPE, what a shell reports for such a command
    return status


if __name__ == "__main__":
    sys.exit(run())
