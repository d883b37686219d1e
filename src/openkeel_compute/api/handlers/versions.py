"""GET /v2.1 and /v2: the document of the version the request was made to."""

from openkeel_compute.api import common, links, versions
from openkeel_compute.api.wsgi import operation

SHOW_QUERY = {"type": "object", "properties": {}, "additionalProperties": True}


@operation(versions="2.0-", query={"2.0-": SHOW_QUERY})
def show(req):
    version_id = "v2.0" if req.legacy_v2 else "v2.1"
    prefix = links.update_link_prefix(req.application_url, common.services(req).conf.api.compute_link_prefix)
    return versions.version_document(prefix, version_id)
