"""Flavor bodies per microversion: base, +description (2.55), +extra_specs (2.61, when the
extra-specs index policy allows), swap 0 instead of "" (2.75), minus rxtx_factor and
OS-FLV-DISABLED:disabled (2.102)."""

from __future__ import annotations

COLLECTION = "flavors"


def brief(req, links, flavor: dict) -> dict:
    body = {"id": flavor["flavorid"], "name": flavor["name"], "links": links.links(COLLECTION, flavor["flavorid"])}
    if req.version >= (2, 55):
        body["description"] = flavor["description"]
    return body


def full(req, links, flavor: dict, extra_specs: dict | None = None) -> dict:
    version = req.version
    body = {
        "id": flavor["flavorid"],
        "name": flavor["name"],
        "ram": flavor["memory_mb"],
        "disk": flavor["root_gb"],
        "swap": flavor["swap"] or ("" if version < (2, 75) else 0),
        "OS-FLV-EXT-DATA:ephemeral": flavor["ephemeral_gb"],
        "vcpus": flavor["vcpus"],
        "os-flavor-access:is_public": bool(flavor["is_public"]),
        "links": links.links(COLLECTION, flavor["flavorid"]),
    }
    if version < (2, 102):
        body["OS-FLV-DISABLED:disabled"] = bool(flavor["disabled"])
        body["rxtx_factor"] = flavor["rxtx_factor"] or ""
    if version >= (2, 55):
        body["description"] = flavor["description"]
    if extra_specs is not None:
        body["extra_specs"] = extra_specs
    return body


def collection(req, links, flavors: list[dict], items: list[dict], collection_name: str, params: dict,
               max_limit: int, link_params: dict | None = None) -> dict:
    result: dict = {"flavors": items}
    requested = params.get("limit")
    max_items = min(int(requested), max_limit) if requested is not None else max_limit
    if max_items and max_items == len(flavors):
        next_params = params if link_params is None else link_params
        result["flavors_links"] = [
            {"rel": "next", "href": links.next_link(collection_name, next_params, flavors[-1]["flavorid"])}
        ]
    return result
