"""A throwaway checkout for running the repository's scripts as a user would, without touching this one.

The scripts find the checkout from their own path (``scripts/..``), so a temp directory whose
``scripts``, ``etc``, ``src`` and ``pyproject.toml`` link to this checkout, and whose ``.venv`` links
to the virtual environment the tests run in, behaves as this checkout with its own ``var/``.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import socket
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV = pathlib.Path(sys.prefix)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_checkout(where: pathlib.Path, extras: tuple[str, ...] = ("cli",)) -> pathlib.Path:
    """``where`` as a checkout; skips when the venv is not the scripts' installed one (it would reinstall)."""
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    for extra in ("base", *extras):
        stamp = VENV / f".openkeel-installed-{extra}"
        if not stamp.exists() or stamp.read_text().strip() != want:
            pytest.skip(f"{VENV} was not installed by scripts/test with the '{extra}' extra: run the tests "
                        "with scripts/test")
    where.mkdir(parents=True, exist_ok=True)
    for name in ("scripts", "etc", "src", "pyproject.toml"):
        os.symlink(ROOT / name, where / name)
    os.symlink(VENV, where / ".venv")
    return where


def clean_env(home: pathlib.Path) -> dict[str, str]:
    """The environment of a user with no OpenStack settings of their own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(HOME=str(home), PYTHONWARNINGS="ignore")
    return env
