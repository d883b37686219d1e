# Sourced by scripts/serve and scripts/test: make .venv (python3 only) and install the project
# into it with the extras the script needs. A stamp per extra holding the hash of pyproject.toml
# skips the install when nothing changed. The first install takes about a minute: pip's own
# progress is shown on stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY=${PYTHON:-python3}

# bootstrap [EXTRA...]: install openkeel-compute[EXTRA,...] into .venv unless already there.
bootstrap() {
    local want extra stale=0 list
    want=$(sha256sum < "$ROOT/pyproject.toml" | cut -d' ' -f1)
    if [ ! -x "$VENV/bin/python" ]; then
        echo "bootstrap: creating the virtual environment $VENV (first run; about a minute in all)" >&2
        "$PY" -m venv "$VENV"
        echo "bootstrap: upgrading pip" >&2
        "$VENV/bin/pip" install --upgrade pip >&2
    fi
    for extra in base "$@"; do
        [ "$(cat "$VENV/.openkeel-installed-$extra" 2>/dev/null)" = "$want" ] || stale=1
    done
    "$VENV/bin/python" -c "import openkeel_compute" 2>/dev/null || stale=1
    [ "$stale" = 1 ] || return 0
    list=$(IFS=,; echo "$*")
    echo "bootstrap: installing openkeel-compute${list:+[$list]} and its dependencies into $VENV" >&2
    "$VENV/bin/pip" install --progress-bar off -e "$ROOT${list:+[$list]}" >&2
    # Bytecode for the checkout (pip compiles only what it installs, and not where
    # PYTHONDONTWRITEBYTECODE is set), and Python's -OO bytecode of everything, which the workers
    # of a multi-worker API use (openkeel_compute/serving.py). A file that does not compile (a
    # dependency's test data) is no reason to stop.
    echo "bootstrap: compiling bytecode" >&2
    "$VENV/bin/python" -m compileall -q -j 0 -o 0 -o 2 "$ROOT/src" "$VENV/lib" >/dev/null 2>&1 || true
    for extra in base "$@"; do
        echo "$want" > "$VENV/.openkeel-installed-$extra"
    done
    echo "bootstrap: installed" >&2
}
