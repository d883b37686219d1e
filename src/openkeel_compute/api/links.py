"""Links the API returns: self, bookmark and collection "next" links, built as Nova builds them."""

from __future__ import annotations

import re
from urllib import parse

_VERSION_SEGMENT = re.compile(r"^v([0-9]+|[0-9]+\.[0-9]+)(/.*|$)")


def url_join(*parts: str) -> str:
    """Join URL parts with single slashes; an empty last part leaves a trailing slash."""
    parts = parts or ("",)
    clean = [part.strip("/") for part in parts if part]
    if not parts[-1]:
        clean.append("")
    return "/".join(clean)


def update_link_prefix(url: str, prefix: str | None) -> str:
    """Swap scheme and host for ``prefix``'s and put its path in front ([api] compute_link_prefix)."""
    if not prefix:
        return url
    url_parts = list(parse.urlsplit(url))
    prefix_parts = list(parse.urlsplit(prefix))
    url_parts[0:2] = prefix_parts[0:2]
    url_parts[2] = prefix_parts[2] + url_parts[2]
    return parse.urlunsplit(url_parts).rstrip("/")


def remove_trailing_version(href: str) -> str:
    parsed = parse.urlsplit(href)
    parts = parsed.path.rsplit("/", 1)
    if not _VERSION_SEGMENT.match(parts.pop()):
        raise ValueError(f"href {href} does not contain version")
    pieces = list(parsed)
    pieces[2] = url_join(*parts)
    return parse.urlunsplit(pieces)


class LinkBuilder:
    """Per-request link helper: computes the prefixes once, then formats links cheaply."""

    __slots__ = ("bookmark_prefix", "collection_prefix", "self_prefix")

    def __init__(self, req, link_prefix: str | None):
        application_url = req.application_url
        ctx = req.context
        # Nova puts the project id in links when it appears anywhere in the request URL.
        project_id = ctx.project_id if ctx is not None and ctx.project_id and ctx.project_id in req.url else ""
        self_base = update_link_prefix(application_url, link_prefix)
        bookmark_base = update_link_prefix(remove_trailing_version(application_url), link_prefix)
        self.self_prefix = url_join(self_base, project_id, "x")[:-1]
        self.bookmark_prefix = url_join(bookmark_base, project_id, "x")[:-1]
        self.collection_prefix = (self_base, project_id)

    def links(self, collection: str, identifier: str) -> list[dict]:
        return [
            {"rel": "self", "href": f"{self.self_prefix}{collection}/{identifier}"},
            {"rel": "bookmark", "href": f"{self.bookmark_prefix}{collection}/{identifier}"},
        ]

    def next_link(self, collection: str, params: dict[str, str], marker: str) -> str:
        params = dict(sorted(params.items()))
        params["marker"] = marker
        base, project_id = self.collection_prefix
        return f"{url_join(base, project_id, collection)}?{parse.urlencode(params)}"
