"""/images/{image_id}/metadata (+ /{key}), Nova's proxy to an image's properties, up to 2.38.

Reads and writes go to the image service with the caller's token, as Nova's proxy does: a write
gives the image exactly the properties Nova computes (one JSON-patch), checked first against the
caller's metadata_items quota ("Image metadata limit exceeded"). The image service decides who may
see and change an image: its refusal is Nova's 403 "Not authorized for image …".
"""

from __future__ import annotations

import contextlib

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import IMAGE_NOT_FOUND, image_service, unavailable_as_503
from openkeel_compute.api.schemas.metadata import CREATE, UPDATE, UPDATE_ALL
from openkeel_compute.api.views import images as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import quotas
from openkeel_compute.images import errors as image_errors

VERSIONS = "-2.38"  # Nova's MAX_IMAGE_META_PROXY_API_SUPPORT_VERSION


@contextlib.contextmanager
def _image_errors():
    with unavailable_as_503():
        try:
            yield
        except image_errors.ImageNotAuthorized as exc:
            raise faults.Forbidden(exc.message) from None
        except (image_errors.ImageNotFound, image_errors.ImageBadRequest):
            raise faults.NotFound(IMAGE_NOT_FOUND) from None


def _image(req, image_id: str) -> dict:
    with _image_errors():
        return image_service(req).show(req.context, image_id, req.environ)


def _check_quota(req, metadata: dict) -> None:
    if not metadata:
        return
    with common.read(req) as conn:
        try:
            quotas.check_metadata_and_files(conn, common.services(req).conf, req.context.project_id,
                                            req.context.user_id, metadata, None)
        except quotas.OverQuota:
            raise faults.Forbidden("Image metadata limit exceeded") from None


def _write(req, image_id: str, properties: dict) -> dict:
    _check_quota(req, properties)
    with _image_errors():
        return image_service(req).update_properties(req.context, image_id, properties, req.environ)


@operation(versions=VERSIONS, expected=(403, 404))
@wsgi_path_params
def index(req, image_id):
    return {"metadata": view.properties(_image(req, image_id))}


@operation(versions=VERSIONS, expected=(403, 404))
@wsgi_path_params
def show(req, image_id, key):
    metadata = view.properties(_image(req, image_id))
    if key not in metadata:
        raise faults.NotFound("The resource could not be found.")
    return {"meta": {key: metadata[key]}}


@operation(versions=VERSIONS, body={"2.0-": CREATE}, expected=(400, 403, 404))
@wsgi_path_params
def create(req, image_id):
    properties = {**_image(req, image_id)["properties"], **req.body["metadata"]}
    return {"metadata": view.properties(_write(req, image_id, properties))}


@operation(versions=VERSIONS, body={"2.0-": UPDATE}, expected=(400, 403, 404))
@wsgi_path_params
def update(req, image_id, key):
    meta = req.body["meta"]
    if key not in meta:
        raise faults.BadRequest("Request body and URI mismatch")
    properties = {**_image(req, image_id)["properties"], key: meta[key]}
    _write(req, image_id, properties)
    return {"meta": meta}


@operation(versions=VERSIONS, body={"2.0-": UPDATE_ALL}, expected=(400, 403, 404))
@wsgi_path_params
def update_all(req, image_id):
    _image(req, image_id)
    metadata = req.body["metadata"]
    _write(req, image_id, metadata)
    return {"metadata": metadata}


@operation(versions=VERSIONS, success=204, expected=(403, 404))
@wsgi_path_params
def delete(req, image_id, key):
    properties = dict(_image(req, image_id)["properties"])
    if key not in properties:
        raise faults.NotFound("Invalid metadata key")
    properties.pop(key)
    _write(req, image_id, properties)
    return Response(None)
