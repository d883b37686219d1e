"""Where the Nova oracle's virtual environment and its Python are."""

from __future__ import annotations

import os
import pathlib

ORACLE_VENV = pathlib.Path(os.environ.get("NOVA_ORACLE_VENV", "/root/.cache/nova-oracle/venv"))


ORACLE_PYTHON = ORACLE_VENV / "bin" / "python"
