"""GET /v2.1 and /v2: the document of the version the request was made to.

The same document answers GET /v2.1/{project_id}/ and GET /v2.1/versions/{id} (with or without
the project id); those go through authentication like every other API route.
"""

from openkeel_compute.api import common, faults, links, versions
from openkeel_compute.api.wsgi import operation

SHOW_QUERY = {"type": "object", "properties": {}, "additionalProperties": True}


def _document(req, version_id: str) -> dict:
    prefix = links.update_link_prefix(req.application_url, common.services(req).conf.api.compute_link_prefix)
    return versions.version_document(prefix, version_id)


@operation(versions="2.0-", query={"2.0-": SHOW_QUERY})
def show(req):
    return _document(req, "v2.0" if req.legacy_v2 else "v2.1")


@operation(versions="2.0-", query={"2.0-": SHOW_QUERY}, expected=(404,))
def show_version(req, id):
    # The legacy /v2 API only knows itself, whatever the id; /v2.1 shows v2.0 or v2.1.
    version_id = "v2.0" if req.legacy_v2 else id
    if version_id not in versions.VERSIONS:
        raise faults.NotFound("The resource could not be found.")
    return _document(req, version_id)
