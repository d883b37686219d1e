"""The version documents: ``/`` (all versions), ``/v2.1`` and ``/v2`` (one each), and the 300
"multiple choices" answer Nova gives for any other path outside the versioned APIs."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from openkeel_compute.api import microversion
from openkeel_compute.api.links import url_join

_DOCS_LINK = {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"}

VERSIONS: dict[str, dict[str, Any]] = {
    "v2.0": {
        "id": "v2.0",
        "status": "DEPRECATED",
        "version": "",
        "min_version": "",
        "updated": "2025-07-04T12:00:00Z",
        "links": [_DOCS_LINK],
        "media-types": [
            {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2"}
        ],
    },
    "v2.1": {
        "id": "v2.1",
        "status": "CURRENT",
        "version": str(microversion.MAX_VERSION),
        "min_version": str(microversion.MIN_VERSION),
        "updated": "2013-07-23T11:33:21Z",
        "links": [_DOCS_LINK],
        "media-types": [
            {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
        ],
    },
}


def _path_segment(version_id: str) -> str:
    return "v2.1" if version_id.startswith("v2.1") else "v2"


def _href(prefix: str, version_id: str, path: str = "") -> str:
    return url_join(prefix, _path_segment(version_id), path)


def versions_document(prefix: str) -> bytes:
    return orjson.dumps(
        {
            "versions": [
                {
                    "id": v["id"],
                    "status": v["status"],
                    "version": v["version"],
                    "min_version": v["min_version"],
                    "updated": v["updated"],
                    "links": [{"rel": "self", "href": _href(prefix, v["id"])}],
                }
                for _, v in sorted(VERSIONS.items())
            ]
        }
    )


def version_document(application_url: str, version_id: str) -> dict:
    doc = copy.deepcopy(VERSIONS[version_id])
    doc["links"].insert(0, {"rel": "self", "href": application_url.rstrip("/") + "/"})
    return {"version": doc}


def choices_document(prefix: str, path: str) -> bytes:
    return orjson.dumps(
        {
            "choices": [
                {
                    "id": v["id"],
                    "status": v["status"],
                    "links": [{"rel": "self", "href": _href(prefix, v["id"], path)}],
                    "media-types": v["media-types"],
                }
                for _, v in sorted(VERSIONS.items())
            ]
        }
    )
