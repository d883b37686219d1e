"""Process trees read from /proc: the processes a benchmarked service runs, and the CPU time they used.

Shared by bench/compare, bench/servers_compare.py and the tests that count a server's processes.
"""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree(root: int) -> list[int]:
    """``root`` and all its descendants, found by scanning /proc for parent ids."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of one process (0 once it is gone)."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu(*roots: int) -> float:
    """CPU time of every process in the trees under ``roots``."""
    return sum(cpu_seconds(pid) for root in roots for pid in tree(root))
