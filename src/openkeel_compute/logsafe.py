"""Log lines a client cannot forge: control and other non-printable characters are escaped.

A request path, a query string, a header or a name that reaches a log message may carry CR, LF,
NUL, ESC (terminal escape sequences) or other characters that are not printable. Written raw they
start a fake log line (``/flavors/x%0d%0a2026-12-01 … FORGED``), hide text from a terminal or
corrupt a log shipper. Two hooks make every line safe, whoever configured logging:

* ``install()`` replaces the process's log record factory: a record's message (format string with
  its arguments) escapes every non-printable character — ``\\r``, ``\\n``, ``\\t`` by name, others
  as ``\\xNN``/``\\uNNNN``/``\\UNNNNNNNN``. It is applied in every entry point (``setup_logging``)
  and by ``deploy()``, so a WSGI server with its own logging configuration gets it too.
* ``SafeFormatter`` (used by ``setup_logging``) also escapes the message lines of a traceback (an
  exception's text may quote client input); the traceback's own structure keeps its line breaks.

Printable text, non-ASCII letters included, is left untouched; a message without anything to
escape costs one ``str.isprintable()``.
"""

from __future__ import annotations

import logging
import traceback

_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _escape_char(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape(text: str) -> str:
    """``text`` with every non-printable character (spaces excepted) escaped."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape_char(char) for char in text)


class _SafeRecord(logging.LogRecord):
    def getMessage(self) -> str:
        return escape(super().getMessage())


def install() -> None:
    """Make every log record of this process escape its message (idempotent)."""
    factory = logging.getLogRecordFactory()
    if factory is _SafeRecord or getattr(factory, "openkeel_safe", False):
        return
    if factory is logging.LogRecord:
        logging.setLogRecordFactory(_SafeRecord)
        return

    def chained(*args, **kwargs):  # someone else's factory: keep it, and escape what it returns
        record = factory(*args, **kwargs)
        message = record.getMessage
        record.getMessage = lambda: escape(message())
        return record

    chained.openkeel_safe = True  # type: ignore[attr-defined]  # a mark on the function itself
    logging.setLogRecordFactory(chained)


# Chunks of a formatted traceback that are its structure, not an exception's text.
_STRUCTURE = ("Traceback (most recent call last):", "  File ", "  [Previous line repeated")
_CHAIN_MESSAGES = (
    getattr(traceback, "_cause_message", "\nThe above exception was the direct cause of the following exception:\n\n"),
    getattr(traceback, "_context_message",
            "\nDuring handling of the above exception, another exception occurred:\n\n"),
)


def format_exception(exc_info) -> str:
    """A traceback whose exception messages (and notes) are escaped, one logical line each."""
    exc_type, value, tb = exc_info
    lines = []
    for chunk in traceback.TracebackException(exc_type, value, tb).format():
        if chunk.startswith(_STRUCTURE) or chunk in _CHAIN_MESSAGES:
            lines.append(chunk)
        else:
            lines.append(escape(chunk.removesuffix("\n")) + "\n")
    return "".join(lines).removesuffix("\n")


class SafeFormatter(logging.Formatter):
    """A formatter whose tracebacks cannot carry a forged line (see ``format_exception``)."""

    def formatException(self, ei) -> str:
        return format_exception(ei)

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached its own, unescaped, traceback text on the record.
        cached = record.exc_text
        record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached
