"""Processes the tests start: their descendants, and stopping a whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil


def tree(root: int) -> list[int]:
    """``root`` and its descendants (``[root]`` once it is gone)."""
    try:
        return [root] + [child.pid for child in psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return [root]


def tree_of(root: int, count: int, timeout: float = 60) -> list[int]:
    """``root`` and its descendants once there are ``count`` of them (or whatever there is at ``timeout``)."""
    deadline = time.monotonic() + timeout
    while len(tree(root)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return tree(root)


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (none once it is gone)."""
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def stop_group(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM to the process group ``proc`` leads (started with ``start_new_session``); SIGKILL if it is
    still there after ``timeout`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)
