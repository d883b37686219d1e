"""What every handler shares: services, policy checks, catalogue error mapping, DB access."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from oslo_policy import policy as oslo_policy
from oslo_utils import strutils
from sqlalchemy import Engine

from openkeel_compute import errors, policies
from openkeel_compute.api import faults
from openkeel_compute.api.links import LinkBuilder
from openkeel_compute.api.page_cache import PageCache
from openkeel_compute.catalog.flavors import Caller
from openkeel_compute.db import api as db_api

SERVER_PAGES_MAX_BYTES = 32 * 1024 * 1024


@dataclasses.dataclass
class Services:
    """Process-wide collaborators handed to handlers (no globals)."""

    conf: Any  # oslo.config's ConfigOpts: its groups and options are attributes made at run time
    engine: Engine
    notifier: Any = None
    verify_project: Callable[[object, str, dict], None] | None = None  # (context, project id, WSGI environ)
    images: Any = None  # the image service's client, made on first use (POST /servers)
    network: Any = None  # Neutron's client when [neutron] is set, made on first use
    volume: Any = None  # Cinder's client when [cinder] is set, made on first use
    pages: PageCache = dataclasses.field(default_factory=PageCache)  # rendered lists (api/page_cache.py)
    # Server lists apart: their pages are larger and must not push the flavor lists out.
    server_pages: PageCache = dataclasses.field(default_factory=lambda: PageCache(SERVER_PAGES_MAX_BYTES))


def limit(req) -> int:
    """The page size asked for (the last ``limit`` given), at most [api] max_limit.

    Nova reads it with oslo's integer check after the query schema, whose pattern lets a lone
    newline through: anything int() refuses is its 400, never a server error.
    """
    max_limit = services(req).conf.api.max_limit
    asked = query_int(req, "limit")
    return max_limit if asked is None else min(asked, max_limit)


def query_int(req, name: str) -> int | None:
    """The last ``name`` of the query as Nova's ``common._get_int_param`` reads it (None: not given): oslo's
    integer check, non-negative, its failure Nova's 400 "Invalid input received: <name> must be an integer".
    The query schemas' pattern ``^[0-9]*$`` lets a lone newline through, as Nova's does."""
    values = req.query.get(name)
    if not values:
        return None
    try:
        return strutils.validate_integer(values[-1], name, min_value=0)
    except ValueError as exc:
        raise faults.BadRequest(f"Invalid input received: {exc}") from None


def services(req) -> Services:
    return req.environ["openkeel.services"]


def can(req, rule: str, target: dict | None = None, *, fatal: bool = True) -> bool:
    """One policy check; a denial is Nova's 403 "Policy doesn't allow … to be performed."."""
    try:
        return policies.authorize(req.context, rule, target, fatal=fatal)
    except oslo_policy.PolicyNotAuthorized:
        raise faults.Forbidden(f"Policy doesn't allow {rule} to be performed.") from None
    except oslo_policy.InvalidScope:
        raise faults.Forbidden(f"Policy doesn't allow {rule} to be performed.") from None


def caller(req) -> Caller:
    return Caller(project_id=req.context.project_id, is_admin=req.context.is_admin)


def links(req) -> LinkBuilder:
    return LinkBuilder(req, services(req).conf.api.compute_link_prefix)


@contextlib.contextmanager
def domain_errors():
    """Domain errors of the catalogue and the server state → Nova's faults with their messages."""
    try:
        yield
    except errors.NotFound as exc:
        raise faults.NotFound(exc.message) from None
    except errors.Conflict as exc:
        raise faults.Conflict(exc.message) from None
    except errors.Invalid as exc:
        raise faults.BadRequest(exc.message) from None
    except errors.Forbidden as exc:
        raise faults.Forbidden(exc.message) from None



@contextlib.contextmanager
def write(req):
    """One transaction for one API write, with catalogue errors mapped to faults. A server read in
    it is locked (``in_write``): see handlers/servers.py's ``read_server``."""
    with domain_errors(), db_api.transaction(services(req).engine) as conn:
        conn.info[_WRITE] = True
        try:
            yield conn
        finally:
            # (a connection lost meanwhile is discarded with its info: nothing to clear then)
            with contextlib.suppress(Exception):
                conn.info.pop(_WRITE, None)


_WRITE = "openkeel.api_write"


def in_write(conn) -> bool:
    """Whether ``conn`` carries an API write transaction (``write``)."""
    return bool(conn.info.get(_WRITE))


@contextlib.contextmanager
def read(req):
    with domain_errors(), db_api.reader(services(req).engine) as conn:
        yield conn


@contextlib.contextmanager
def read_one(req):
    """For reads of a single prebuilt statement through the DB-API cursor (db_api.raw_reader)."""
    with domain_errors(), db_api.raw_reader(services(req).engine) as conn:
        yield conn


def notify(req, event: str, flavor: dict) -> None:
    """Send a versioned notification after the transaction committed (never fails the request)."""
    notifier = services(req).notifier
    if notifier is None:
        return
    getattr(notifier, "flavor_" + event)(flavor, req.context)


def notify_keypair(req, action: str, phase: str, keypair: dict) -> None:
    """Send ``keypair.<action>.<phase>`` (notifications/keypair.py says when); never fails the request."""
    notifier = services(req).notifier
    if notifier is None:
        return
    from openkeel_compute.notifications import KeypairAction, Phase

    notifier.keypair(KeypairAction(action), Phase(phase), keypair, req.context)
