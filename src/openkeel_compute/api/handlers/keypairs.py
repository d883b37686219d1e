"""/os-keypairs: create (generated or imported), list (paged from 2.35), show, delete.

Per microversion as Nova 34.0.0: ``type`` from 2.2 (201/204 from there on, 200/202 before),
``user_id`` for other users from 2.10 (policy decides), limit/marker from 2.35, strict queries
from 2.75, no generated keys and ``@``/``.`` in names from 2.92. The key pairs quota is checked
before the row is written, in the same transaction, with the user's other writers serialised.
"""

from __future__ import annotations

from openkeel_compute.api import common, stored_text
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import keypairs_quotas as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import keypairs, quotas
from openkeel_compute.policies import keypairs_quotas as rules

_INDEX = ("name", "public_key", "fingerprint")


def _first(req, key: str):
    values = req.query.get(key)
    return values[0] if values else None


def _last(req, key: str):
    values = req.query.get(key)
    return values[-1] if values else None


def _user(req) -> str:
    """The key pairs' owner: the caller, or ``user_id`` from the query from 2.10."""
    if req.at_least(2, 10):
        return _first(req, "user_id") or req.context.user_id
    return req.context.user_id


def _time(value) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value is not None else None


def _view(keypair: dict, fields: tuple[str, ...], key_type: bool) -> dict:
    body = {f: keypair[f] for f in fields}
    if key_type:
        body["type"] = keypair["type"]
    return body


@operation(body=schema.KEYPAIR_CREATE, expected=(400, 403, 409))
def create(req):
    params = req.body["keypair"]
    name = params["name"].strip()
    key_type = params.get("type", keypairs.SSH)
    user_id = (params.get("user_id") if req.at_least(2, 10) else None) or req.context.user_id
    common.can(req, rules.KEYPAIRS % "create", {"user_id": user_id})
    stored_text.refuse_long_id(user_id, "user_id")
    conf = common.services(req).conf
    private_key = None
    with common.read(req) as conn:
        quotas.check_key_pairs(conn, conf, req.context.project_id, user_id, keypairs.count_for_user(conn, user_id))
    action = "import" if "public_key" in params else "create"
    common.notify_keypair(req, action, "start", {"user_id": user_id, "name": name, "type": key_type,
                                                 "public_key": params.get("public_key")})
    with common.domain_errors():
        if "public_key" in params:
            public_key = params["public_key"]
            fingerprint = keypairs.fingerprint(public_key, key_type)
        elif key_type == keypairs.X509:
            private_key, public_key, fingerprint = keypairs.generate_x509(user_id)
        else:
            private_key, public_key, fingerprint = keypairs.generate_ssh()
    with common.write(req) as conn:
        quotas.lock_project(conn, "user:" + user_id)
        # Checked again where it is written, so that concurrent imports never pass the limit.
        quotas.check_key_pairs(conn, conf, req.context.project_id, user_id, keypairs.count_for_user(conn, user_id))
        keypair = keypairs.create(conn, user_id, name, key_type, public_key, fingerprint)
    common.notify_keypair(req, action, "end", keypair)
    body = {}
    if private_key is not None:
        body["private_key"] = private_key
    if req.at_least(2, 2):
        body["type"] = key_type
    body.update(public_key=public_key, fingerprint=fingerprint, user_id=user_id, name=keypair["name"])
    return Response({"keypair": body}, status=201 if req.at_least(2, 2) else 200)


@operation(query=schema.KEYPAIR_INDEX_QUERY, expected=(400,))
def index(req):
    user_id = _user(req)
    common.can(req, rules.KEYPAIRS % "index", {"user_id": user_id})
    limit = marker = None
    paged = req.at_least(2, 35)
    max_limit = common.services(req).conf.api.max_limit
    if paged:
        limit = common.limit(req)
        marker = _last(req, "marker")
    with common.read(req) as conn:
        rows = keypairs.list_for_user(conn, user_id, limit=limit, marker=marker)
    key_type = req.at_least(2, 2)
    body = {"keypairs": [{"keypair": _view(r, _INDEX, key_type)} for r in rows]}
    if paged:
        raw = _last(req, "limit")
        max_items = min(int(raw), max_limit) if raw is not None else max_limit
        if max_items and max_items == len(rows):
            params = dict(sorted((k, v) for k, values in req.query.items() for v in values))
            body["keypairs_links"] = [{"rel": "next",
                                       "href": common.links(req).next_link("os-keypairs", params, rows[-1]["name"])}]
    return body


@operation(query=schema.KEYPAIR_ONE_QUERY, expected=(404,))
@wsgi_path_params
def show(req, keypair_name):
    user_id = _user(req)
    common.can(req, rules.KEYPAIRS % "show", {"user_id": user_id})
    with common.read(req) as conn:
        keypair = keypairs.get(conn, user_id, keypair_name)
    body = {f: keypair[f] for f in ("name", "public_key", "fingerprint", "user_id")}
    body.update(created_at=_time(keypair["created_at"]), deleted=False, deleted_at=None, id=keypair["id"],
                updated_at=_time(keypair["updated_at"]))
    if req.at_least(2, 2):
        body["type"] = keypair["type"]
    return {"keypair": body}


@operation(query=schema.KEYPAIR_ONE_QUERY, expected=(404,))
@wsgi_path_params
def delete(req, keypair_name):
    user_id = _user(req)
    common.can(req, rules.KEYPAIRS % "delete", {"user_id": user_id})
    keypair = None
    if common.services(req).notifier is not None:  # the payload needs the pair as it was
        with common.read(req) as conn:
            keypair = keypairs.get(conn, user_id, keypair_name)
        common.notify_keypair(req, "delete", "start", keypair)
    with common.write(req) as conn:
        keypairs.destroy(conn, user_id, keypair_name)
    if keypair is not None:
        common.notify_keypair(req, "delete", "end", keypair)
    if req.at_least(2, 2):
        return Response(None, status=204)
    return Response(None, status=202, content_type="text/html; charset=UTF-8")

