# Sourced by scripts/serve and scripts/test: make .venv (python3 only) and install the project
# into it. A stamp holding the hash of pyproject.toml skips the install when nothing changed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY=${PYTHON:-python3}

bootstrap() {
    local extras=$1 stamp
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating $VENV" >&2
        "$PY" -m venv "$VENV"
        "$VENV/bin/pip" install -q --upgrade pip >&2
    fi
    stamp="$VENV/.openkeel-installed-$extras"
    local want
    want=$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! "$VENV/bin/python" -c "import openkeel_compute" 2>/dev/null; then
        echo "installing openkeel-compute${extras:+[$extras]} into $VENV" >&2
        if [ -n "$extras" ]; then
            "$VENV/bin/pip" install -q -e "$ROOT[$extras]" >&2
        else
            "$VENV/bin/pip" install -q -e "$ROOT" >&2
        fi
        echo "$want" > "$stamp"
    fi
}
