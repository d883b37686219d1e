"""Where noVNC's files are: [vnc] web, else the directories distributions install them in. noVNC is not on
PyPI; Debian and Ubuntu ship it as the ``novnc`` package (/usr/share/novnc)."""

from __future__ import annotations

import os

SEARCHED = ("/usr/share/novnc", "/usr/share/webapps/novnc", "/usr/local/share/novnc")
MISSING = ("noVNC's files were not found in {where}: install noVNC (Debian and Ubuntu: `apt-get install novnc`) "
           "or point [vnc] web at its directory (the one holding vnc.html)")


def _holds_novnc(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "vnc.html")) or os.path.isfile(os.path.join(path, "vnc_lite.html"))


def find(configured: str | None) -> str | None:
    """noVNC's directory, or None when it is nowhere (serial consoles still work then)."""
    candidates = (configured,) if configured else SEARCHED
    for path in candidates:
        if path and _holds_novnc(path):
            return os.path.abspath(path)
    return None


def missing_message(configured: str | None) -> str:
    return MISSING.format(where=configured if configured else ", ".join(SEARCHED))
