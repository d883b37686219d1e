"""The ``openkeel-compute`` command line: one sub-command per module in this package.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (called with the parsed arguments, returns an exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that contribute sub-commands, in help order.
COMMAND_MODULES = (
    "openkeel_compute.cmd.serve",
    "openkeel_compute.cmd.db",
    "openkeel_compute.cmd.flavor",
    "openkeel_compute.cmd.extra_specs",
    "openkeel_compute.cmd.controller",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openkeel-compute", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # that room has not shipped its commands yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
