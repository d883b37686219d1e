"""WSGI entry point for servers: ``openkeel_compute.wsgi:application`` (granian:
``openkeel_compute.wsgi:granian_application``, see ``for_granian``).

Configuration files come from $OPENKEEL_CONFIG_FILES (os.pathsep-separated), which
`openkeel-compute serve` sets for its workers. Importing this module builds the application.

With ``[api] auth_strategy = noauth2`` the application refuses to load unless the address it is
served on is a loopback one: $OPENKEEL_LISTEN_HOST (set by `openkeel-compute serve` to the address
it checked and binds), or else ``[wsgi] host``, which an operator running another WSGI server
keeps equal to that server's bind. Whatever the declaration, the application answers noauth2
requests only from loopback peers (api/auth.py ``LoopbackPeersOnly``).
"""

from __future__ import annotations

import os

from openkeel_compute.startup import collector_paused


def _load():
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.cmd.common import setup_logging
    from openkeel_compute.conf import build_conf

    files = [p for p in os.environ.get("OPENKEEL_CONFIG_FILES", "").split(os.pathsep) if p]
    argv: list[str] = []
    for path in files:
        argv += ["--config-file", path]
    conf = build_conf(argv)
    setup_logging(conf.debug)
    if conf.api.auth_strategy == "noauth2":
        from openkeel_compute.api.auth import noauth2_bind_error

        error = noauth2_bind_error(os.environ.get("OPENKEEL_LISTEN_HOST") or conf.wsgi.host)
        if error is not None:
            raise SystemExit(f"error: {error}")
    return deploy(conf)


def _as_granian_text(value: str) -> str:
    """A header value as PEP 3333 gives it (one character per byte, Latin-1) turned into the text whose
    UTF-8 is those bytes. A value whose bytes are not UTF-8 stays as it is (granian cannot send them)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def for_granian(app):
    """``app`` as granian needs it. A WSGI server writes each character of a header value as one byte
    (Latin-1), so a value built from the request path (a tag's Location) carries the client's UTF-8 bytes
    back, as Nova answers; granian writes the value's UTF-8 instead, which would encode those bytes twice."""

    def granian_app(environ, start_response):
        def start(status, headers, exc_info=None):
            if not all(value.isascii() for _name, value in headers):
                headers = [(name, _as_granian_text(value)) for name, value in headers]
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return granian_app


# The imports and the app are built with the collector paused, then frozen (openkeel_compute.startup).
with collector_paused():
    application = _load()
granian_application = for_granian(application)  # what `openkeel-compute serve` gives granian
