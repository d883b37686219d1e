"""/images (list, detail, show, delete), Nova's proxy to the image service, up to 2.35 (404 after).

Every call goes to the image service (Glance, or the development one) with the caller's token, as
Nova's proxy does: Nova has no policy of its own here, the image service decides what the caller sees
and may delete. The list filters are Nova's (name, status, changes-since, server, type, minRam,
minDisk, property-*), passed on under Glance's names with Nova's own mistakes kept (a ``property-``
prefix is stripped as a set of characters, so ``property-type`` filters on ``ype``); ``limit``,
``page_size`` and ``marker`` go to the image service, and a next link follows a full page.

Where Nova answers 500 because the image service failed in a way its handlers do not expect (an image
it may not see, a delete refused for the image's state, the service unreachable), OpenKeel answers
404, 409 and 503 (docs/api.md).
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import IMAGE_NOT_FOUND, image_service, unavailable_as_503
from openkeel_compute.api.views import images as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.images import errors as image_errors

VERSIONS = "-2.35"  # Nova's MAX_PROXY_API_SUPPORT_VERSION
_POSITIVE = {"type": "array",
             "items": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 1, "minLength": 1}}
LIST_QUERY = {"2.0-": {
    "type": "object",
    "properties": {"name": {}, "status": {}, "changes-since": {}, "server": {}, "type": {}, "minRam": {},
                   "minDisk": {}, "limit": _POSITIVE, "page_size": _POSITIVE, "marker": {}, "offset": _POSITIVE},
    "patternProperties": {"^property-.*$": {}},
    "additionalProperties": True}}
SHOW_QUERY = {"2.0-": {"type": "object", "properties": {}, "additionalProperties": True}}
_FILTERS = {"name": "name", "status": "status", "changes-since": "changes-since", "server": "property-instance_uuid",
            "type": "property-image_type", "minRam": "min_ram", "minDisk": "min_disk"}
def image_links(req) -> view.ImageLinks:
    conf = common.services(req).conf
    with unavailable_as_503():
        base = image_service(req).link_base(req.context, req.environ)
    return view.ImageLinks(common.links(req), base, conf.api.glance_link_prefix)


def _glance_filters(req) -> dict[str, str]:
    """Nova's filters (its _get_filters) as its Glance client sends them (_extract_query_params_v2)."""
    filters = {}
    for param, values in req.query.items():
        if param in _FILTERS or param.startswith("property-"):
            filters[_FILTERS.get(param, param)] = values[-1]
    if "property-instance_uuid" in filters and "/" in filters["property-instance_uuid"]:
        filters["property-instance_uuid"] = filters["property-instance_uuid"].rsplit("/", 1)[1]
    if "status" in filters:
        filters["status"] = filters["status"].lower()
    glance = {}
    for name, value in filters.items():
        if name.startswith("property-"):
            glance[name.lstrip("property-")] = value  # noqa: B005 (sic: Nova strips a set of characters)
        elif name == "changes-since":
            glance["updated_at"] = "gte:" + value
        else:
            glance[name] = value
    return glance


def _integer(req, name: str) -> int | None:
    return common.query_int(req, name)


def _images(req) -> list[dict]:
    limit, page_size = _integer(req, "limit"), _integer(req, "page_size")
    _integer(req, "offset")  # checked, as Nova checks it, then not used
    marker = req.query["marker"][-1] if req.query.get("marker") else None
    with unavailable_as_503():
        try:
            return image_service(req).list_images(req.context, _glance_filters(req), limit=limit,
                                                  page_size=page_size, marker=marker or None, environ=req.environ)
        except image_errors.ImageListRefused as exc:
            raise faults.Fault(exc.message, 403 if exc.status in (401, 403) else 400) from None


def _list_body(req, images: list[dict], render, collection: str) -> dict:
    links = image_links(req)
    body = {"images": [render(image, links) for image in images]}
    max_limit = common.services(req).conf.api.max_limit
    raw = req.query.get("limit")
    page = min(int(raw[-1]), max_limit) if raw else max_limit
    if page and page == len(images):
        params = dict(sorted((k, v) for k, values in req.query.items() for v in values))
        body["images_links"] = [{"rel": "next",
                                 "href": common.links(req).next_link(collection, params, images[-1]["id"])}]
    return body


@operation(versions=VERSIONS, query=LIST_QUERY, expected=(400,))
def index(req):
    return _list_body(req, _images(req), view.basic, "images")


@operation(versions=VERSIONS, query=LIST_QUERY, expected=(400,))
def detail(req):
    return _list_body(req, _images(req), view.detailed, "images/detail")


def fetch(req, image_id: str) -> dict:
    with unavailable_as_503():
        try:
            return image_service(req).show(req.context, image_id, req.environ)
        except (image_errors.ImageNotFound, image_errors.ImageNotAuthorized, image_errors.ImageBadRequest):
            raise faults.NotFound(IMAGE_NOT_FOUND) from None


@operation(versions=VERSIONS, query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, image_id):
    image = fetch(req, image_id)
    return {"image": view.detailed(image, image_links(req))}


@operation(versions=VERSIONS, success=204, expected=(403, 404))
@wsgi_path_params
def delete(req, image_id):
    with unavailable_as_503():
        try:
            image_service(req).delete(req.context, image_id, req.environ)
        except image_errors.ImageNotFound:
            raise faults.NotFound(IMAGE_NOT_FOUND) from None
        except image_errors.ImageNotAuthorized:
            raise faults.Forbidden("You are not allowed to delete the image.") from None
        except image_errors.ImageDeleteConflict as exc:
            raise faults.Conflict(exc.message) from None
        except image_errors.ImageBadRequest:
            raise faults.NotFound(IMAGE_NOT_FOUND) from None
    return Response(None)
