"""Handlers of the compute API; see api/router.py for which URI and method reach each one."""

from __future__ import annotations

import functools


def as_wsgi_string(value: str) -> str:
    """A path parameter as Nova sees it: a PEP 3333 "native string", i.e. the raw path bytes
    read as Latin-1. Nova never re-decodes them as UTF-8, so ``/flavors/caf%C3%A9`` is flavor
    ``cafÃ©`` in its 404 message. Flavor ids and extra-spec keys are ASCII by schema, so only
    messages about ids that cannot exist are affected."""
    try:
        return value.encode("utf-8").decode("latin-1")
    except UnicodeEncodeError:  # lone surrogates: leave as they are
        return value


def wsgi_path_params(func):
    """Give a handler its string path parameters in Nova's (Latin-1) form."""

    @functools.wraps(func)
    def wrapper(req, **params):
        return func(req, **{k: as_wsgi_string(v) if isinstance(v, str) else v for k, v in params.items()})

    return wrapper
