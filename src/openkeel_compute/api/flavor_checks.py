"""Nova's validation of a flavor body, for the rooms that must refuse what POST /flavors refuses.

The flavor API's own schemas decide and word the refusal (POST /flavors at 2.55 for the fields, POST
.../os-extra_specs for the keys), so the messages are Nova's; the field at fault comes from the
schema's error itself. The mapping (kubevirt/) takes these checks as an argument (``check=``): it
never imports the API.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from openkeel_compute.model.flavor import EPHEMERAL, IS_PUBLIC, InvalidFlavor

_CREATE_FIELDS = ("name", "id", "ram", "vcpus", "disk", EPHEMERAL, "swap", "rxtx_factor", IS_PUBLIC, "description")


def _refuse(schema: Mapping[str, Any], body: Mapping[str, Any], where: str) -> None:
    """Raise InvalidFlavor with the flavor API's own message if its schema refuses ``body``."""
    from openkeel_compute.api import validation

    refusal = validation.body_refusal(dict(schema), body)
    if refusal is not None:
        field, message = refusal
        raise InvalidFlavor(field or where, message)


@functools.cache
def _plain_rules() -> tuple[dict[str, tuple[int, int]], re.Pattern[str], re.Pattern[str], re.Pattern[str],
                            re.Pattern[str], float]:
    """Bounds and patterns of the flavor API's schemas, compiled once for ``_plainly_valid``."""
    from openkeel_compute.api import validation
    from openkeel_compute.api.schemas import flavor_extra_specs, flavors

    properties = flavors.create_v255["properties"]["flavor"]["properties"]
    bounds = {field: (properties[field]["minimum"], properties[field]["maximum"])
              for field in ("ram", "vcpus", "disk", EPHEMERAL, "swap")}
    return (bounds, re.compile(properties["id"]["pattern"]), re.compile(validation.name_regex()),
            re.compile(properties["description"]["pattern"]), re.compile(flavor_extra_specs.KEY_PATTERN),
            properties["rxtx_factor"]["maximum"])


def _plainly_valid(create: Mapping[str, Any], specs: Any) -> bool:
    """True when the API's schemas surely accept these fields and keys: plain types, within their bounds.

    Only a shortcut: anything else goes through the schemas themselves, which decide and word the refusal.
    """
    bounds, id_pattern, name_pattern, description_pattern, key_pattern, rxtx_max = _plain_rules()
    for field, (low, high) in bounds.items():
        value = create.get(field, low)
        if type(value) is not int or not low <= value <= high:
            return False
    flavor_id, name = create.get("id"), create.get("name")
    description = create.get("description")
    rxtx = create.get("rxtx_factor", 1.0)
    if (type(flavor_id) is not str or len(flavor_id) > 255 or id_pattern.search(flavor_id) is None
            or type(name) is not str or not 0 < len(name) <= 255 or name_pattern.search(name) is None
            or not (description is None or type(description) is str and len(description) <= 65535
                    and description_pattern.search(description) is not None)
            or type(rxtx) not in (int, float) or not 0 < rxtx <= rxtx_max
            or type(create.get(IS_PUBLIC, True)) is not bool):
        return False
    if specs is None:
        return True
    return type(specs) is dict and all(
        type(key) is str and key_pattern.search(key) is not None and type(value) is str and len(value) <= 255
        for key, value in specs.items())


def check_fields(body: Mapping[str, Any]) -> None:
    """Refuse what POST /flavors refuses in the fields and POST .../os-extra_specs in the keys (2.86), with
    Nova's messages; InvalidFlavor names the field. The values of the extra specs are the validators'
    (kubevirt.flavor.check_extra_specs)."""
    from openkeel_compute.api.schemas import flavor_extra_specs, flavors

    create = {field: body[field] for field in _CREATE_FIELDS if field in body}
    if create.get("swap") == "":
        del create["swap"]  # no swap: what POST /flavors gets when swap is left out
    specs = body.get("extra_specs")
    if _plainly_valid(create, specs):  # jsonschema costs ~1 ms a flavor: only when it may refuse
        return
    _refuse(flavors.create_v255, {"flavor": create}, "flavor")
    if specs and isinstance(specs, dict):
        _refuse(flavor_extra_specs.create, {"extra_specs": specs}, "extra_specs")


def check_like_nova(body: Mapping[str, Any]) -> None:
    """Everything Nova 34.0.0 refuses in a flavor: the fields, the keys, then the values of the extra specs."""
    from openkeel_compute.kubevirt.flavor import check_extra_specs

    check_fields(body)
    check_extra_specs(body)
