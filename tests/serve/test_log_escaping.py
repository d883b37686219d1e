"""Nothing a client sends can forge a log line: control and non-printable characters are escaped
in the access log, in error logs and in the tracebacks they carry."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from openkeel_compute import logsafe
from openkeel_compute.cmd.common import LOG_FORMAT
from tests.conftest import admin

FORGED = "x\r\n2026-12-01 12:00:00,000 1 INFO openkeel_compute.api.access [req-x] 127.0.0.1 FORGED"


@pytest.mark.parametrize(("raw", "logged"), [
    ("plain /v2.1/flavors?a=b", "plain /v2.1/flavors?a=b"),
    ("é ü 漢字", "é ü 漢字"),
    ("a\r\nb", "a\\r\\nb"),
    ("nul\x00esc\x1b[31mred\x7f", "nul\\x00esc\\x1b[31mred\\x7f"),
    ("tab\there", "tab\\there"),
    ("c1\x85 line\u2028sep rtl\u202eoverride", "c1\\x85 line\\u2028sep rtl\\u202eoverride"),
    ("\U000e0001tag", "\\U000e0001tag"),
])
def test_escape(raw: str, logged: str) -> None:
    assert logsafe.escape(raw) == logged


@pytest.fixture
def captured():
    """Every line the API logs, formatted as the entry points format them."""
    logsafe.install()  # as deploy() and every entry point do
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.extend(self.format(record).split("\n"))

    handler = Collect()
    handler.setFormatter(logsafe.SafeFormatter(LOG_FORMAT))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lines
    root.removeHandler(handler)
    root.setLevel(old_level)


def test_a_forged_path_stays_on_its_own_access_log_line(client, captured) -> None:
    # As a WSGI server hands it over: percent-decoded (%0d%0a, %00, %1b arrive as the characters).
    answer = client.get("/v2.1/flavors/" + FORGED + "\x00\x1b[2J", headers=admin())
    assert answer.status_code == 400  # a NUL in an id is refused before any lookup
    access = [line for line in captured if "openkeel_compute.api.access" in line]
    assert len(access) == 1, captured
    assert "x\\r\\n2026-12-01" in access[0] and "\\x00\\x1b[2J" in access[0]
    assert not any(line.startswith("2026-12-01 12:00:00,000") for line in captured)


def test_query_strings_are_escaped_too(client, captured) -> None:
    client.get("/v2.1/flavors?name=a\nFORGED\r", headers=admin())
    access = [line for line in captured if "openkeel_compute.api.access" in line]
    assert len(access) == 1 and "FORGED" in access[0]
    assert all("FORGED" not in line or "openkeel_compute.api.access" in line for line in captured)


def test_tracebacks_escape_the_exception_text_but_keep_their_structure(captured) -> None:
    log = logging.getLogger("openkeel_compute.test")
    try:
        try:
            raise KeyError("inner\nFORGED-1")
        except KeyError as exc:
            raise ValueError(FORGED) from exc
    except ValueError:
        log.exception("request for %s failed", "a\nFORGED-2")
    text = "\n".join(captured)
    assert "request for a\\nFORGED-2 failed" in text
    assert "FORGED-1" in text and "inner\\nFORGED-1" in text
    assert "ValueError: x\\r\\n2026-12-01" in text
    assert not any(line.startswith(("FORGED", "2026-12-01 12")) for line in captured)
    assert sum(line.startswith("Traceback (most recent call last):") for line in captured) == 2
    assert any(line.startswith('  File "') for line in captured)


def test_another_record_factory_is_kept_and_escaped(monkeypatch) -> None:
    seen = []

    def factory(*args, **kwargs):
        seen.append(args[0])
        return logging.LogRecord(*args, **kwargs)

    monkeypatch.setattr(logging, "_logRecordFactory", factory)
    logsafe.install()
    logsafe.install()
    record = logging.getLogRecordFactory()("n", logging.INFO, __file__, 1, "%s", ("a\nb",), None)
    assert record.getMessage() == "a\\nb"
    assert seen == ["n"]


def test_the_entry_points_log_one_line_per_record() -> None:
    code = ("import logging\n"
            "from openkeel_compute.cmd.common import setup_logging\n"
            "setup_logging(False)\n"
            "logging.getLogger('x').warning('name %s', 'a\\r\\nFORGED\\x00\\x1b')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith("WARNING x name a\\r\\nFORGED\\x00\\x1b"), done.stderr
