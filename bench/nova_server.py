"""Nova 34.0.0's compute API for the side-by-side benchmark (bench/compare).

Prepares a directory with nova.conf, api-paste.ini (keystonemiddleware's ``authtoken`` replaced by a
tiny noauth shim that turns ``X-Auth-Token: user:project`` into the X-User-Id/X-Project-Id/X-Roles
headers nova's own ``keystonecontext`` filter reads), a gunicorn config with ONE sync worker, and
runs nova-manage's database setup on SQLite files or PostgreSQL databases.  Only the standard
library is used here, so bench/compare can import it from any Python.

The venv (default ~/.cache/openkeel-bench/nova-venv, $NOVA_BENCH_VENV) is created on first use with
``pip install nova==34.0.0 gunicorn psycopg[binary]`` (psycopg for the PostgreSQL round); when the
team's oracle venv exists its ``pip freeze`` is used as constraints so both run the same tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NOVA_VERSION = "34.0.0"
DEFAULT_VENV = Path(os.environ.get("NOVA_BENCH_VENV", Path.home() / ".cache/openkeel-bench/nova-venv"))
ORACLE_VENV = Path(os.environ.get("NOVA_ORACLE_VENV", Path.home() / ".cache/nova-oracle/venv"))
PYTHON = os.environ.get("NOVA_BENCH_PYTHON", "python3.11")  # nova 34 needs >= 3.11

SHIM = '''\
"""Benchmark-only stand-in for keystonemiddleware's authtoken (not nova code)."""


def filter_factory(global_conf, **local_conf):
    def wrap(app):
        def shim(environ, start_response):
            token = environ.get("HTTP_X_AUTH_TOKEN")
            if token and "HTTP_X_USER_ID" not in environ:
                user, _, project = token.partition(":")
                environ["HTTP_X_USER_ID"] = user
                environ["HTTP_X_PROJECT_ID"] = project or user
                environ.setdefault("HTTP_X_ROLES",
                                   "admin,member,reader" if user == "admin" else "member,reader")
            return app(environ, start_response)
        return shim
    return wrap
'''


def log(msg: str) -> None:
    print(f"nova_server: {msg}", file=sys.stderr, flush=True)


def ensure_venv(venv: Path = DEFAULT_VENV) -> Path:
    """The venv with nova, gunicorn and psycopg; created (a few minutes, once) when missing."""
    py = venv / "bin/python"
    probe = ("import nova, gunicorn, psycopg, importlib.metadata as m; "
             f"assert m.version('nova') == '{NOVA_VERSION}'")
    ok = py.exists() and subprocess.run([str(py), "-c", probe], capture_output=True, check=False).returncode == 0
    if ok:
        return venv
    log(f"creating {venv} (pip install nova=={NOVA_VERSION} gunicorn psycopg[binary]; minutes, once)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    cons: list[str] = []
    if (ORACLE_VENV / "bin/pip").exists():
        freeze = subprocess.run([str(ORACLE_VENV / "bin/pip"), "freeze"], capture_output=True, text=True,
                                check=False).stdout
        lines = [ln for ln in freeze.splitlines() if ln and not ln.startswith("-e") and " @ " not in ln]
        cfile = venv.parent / "nova-constraints.txt"
        cfile.write_text("\n".join(lines) + "\n")
        cons = ["-c", str(cfile)]
    subprocess.run([str(venv / "bin/pip"), "install", "-q", *cons, f"nova=={NOVA_VERSION}", "gunicorn",
                    "psycopg[binary]"], check=True, stdout=sys.stderr)
    return venv


def prepare(d: Path, port: int, api_db: str, cell0_db: str, cell1_db: str, venv: Path = DEFAULT_VENV) -> None:
    """Write the configuration into ``d`` and create the three databases' schemas."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "state").mkdir(exist_ok=True)
    (d / "lock").mkdir(exist_ok=True)
    (d / "nova.conf").write_text(f"""\
[DEFAULT]
host = bench
state_path = {d}/state
transport_url = fake://
debug = False
use_stderr = True

[api_database]
connection = {api_db}

[database]
connection = {cell1_db}

[oslo_messaging_notifications]
driver = noop

[oslo_concurrency]
lock_path = {d}/lock

[keystone]
# flavor access add/remove ask keystone about the project; a closed local port makes nova accept it
endpoint_override = http://127.0.0.1:9/identity/v3
""")
    paste = (venv / "etc/nova/api-paste.ini").read_text()
    swapped = paste.replace(" authtoken keystonecontext ", " benchnoauth keystonecontext ")
    if swapped == paste:
        raise RuntimeError("nova's api-paste.ini has no 'authtoken keystonecontext' pipeline to patch")
    (d / "api-paste.ini").write_text(swapped + "\n[filter:benchnoauth]\npaste.filter_factory = "
                                                "bench_noauth:filter_factory\n")
    (d / "bench_noauth.py").write_text(SHIM)
    (d / "gunicorn.conf.py").write_text(f"""\
import sys
sys.argv[1:] = []  # nova's wsgi app hands sys.argv to oslo.config
bind = "127.0.0.1:{port}"
workers = 1
worker_class = "sync"
timeout = 300
pythonpath = "{d}"
control_socket_disable = True
""")
    manage = [str(venv / "bin/nova-manage"), "--config-file", str(d / "nova.conf")]
    with open(d / "db-sync.log", "w") as out:
        for args in (["api_db", "sync"],
                     ["cell_v2", "map_cell0", "--database_connection", cell0_db],
                     ["cell_v2", "create_cell", "--name", "cell1", "--transport-url", "fake://",
                      "--database_connection", cell1_db],
                     ["db", "sync"]):
            rc = subprocess.run(manage + args, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
            if rc != 0:
                raise RuntimeError(f"nova-manage {' '.join(args)} failed; see {d}/db-sync.log")


def command(d: Path, venv: Path = DEFAULT_VENV) -> tuple[list[str], dict[str, str]]:
    """argv and environment that start nova-api (gunicorn master + one sync worker)."""
    env = dict(os.environ, OS_NOVA_CONFIG_DIR=str(d))
    return [str(venv / "bin/gunicorn"), "-c", str(d / "gunicorn.conf.py"),
            "nova.wsgi.osapi_compute:application"], env
