"""The flavor as GET /flavors/{id} returns it (microversion 2.61), checked and normalised.

Everything the mapping reads goes through ``parse_flavor``, so a bad flavor is refused with a message
naming the field or extra-spec key instead of producing a half-translated object.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

IS_PUBLIC = "os-flavor-access:is_public"
EPHEMERAL = "OS-FLV-EXT-DATA:ephemeral"
DISABLED = "OS-FLV-DISABLED:disabled"

_KNOWN_FIELDS = frozenset(
    {"id", "name", "description", "ram", "disk", "vcpus", "swap", EPHEMERAL, DISABLED, IS_PUBLIC,
     "rxtx_factor", "extra_specs", "access", "links"}
)


class InvalidFlavor(ValueError):
    """A flavor the mapping refuses; ``field`` names the field or extra-spec key at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Flavor(NamedTuple):
    """A checked flavor. ``swap`` keeps the API form ('' for none) so the round trip is exact."""

    id: str
    name: str
    description: str | None
    vcpus: int
    ram: int
    disk: int
    ephemeral: int
    swap: int | str
    is_public: bool
    disabled: bool
    rxtx_factor: float
    extra_specs: Mapping[str, str]
    access: tuple[str, ...]

    @property
    def swap_mib(self) -> int:
        return self.swap if isinstance(self.swap, int) else 0

    def as_api_dict(self) -> dict[str, Any]:
        """The flavor in the shape it came in (GET /flavors/{id} at 2.61, plus "access")."""
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "ram": self.ram,
            "disk": self.disk,
            "vcpus": self.vcpus,
            "swap": self.swap,
            EPHEMERAL: self.ephemeral,
            DISABLED: self.disabled,
            IS_PUBLIC: self.is_public,
            "rxtx_factor": self.rxtx_factor,
            "extra_specs": dict(self.extra_specs),
        }
        if not self.is_public:
            body["access"] = list(self.access)
        return body


def _int(body: Mapping[str, Any], field: str, minimum: int, default: int | None = None) -> int:
    value = body.get(field, default)
    if type(value) is int and value >= minimum:
        return value  # the common case, checked first: this runs for every flavor of a catalogue
    if value is None:
        raise InvalidFlavor(field, "is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFlavor(field, f"{value!r} is not an integer")
    if value < minimum:
        raise InvalidFlavor(field, f"{value} is less than {minimum}")
    return value


def _bool(body: Mapping[str, Any], field: str, default: bool) -> bool:
    value = body.get(field, default)
    if not isinstance(value, bool):
        raise InvalidFlavor(field, f"{value!r} is not a boolean")
    return value


def _text(body: Mapping[str, Any], field: str, *, required: bool, max_length: int = 255) -> str | None:
    value = body.get(field)
    if type(value) is str and 0 < len(value) <= max_length and (not required or not value.isspace()):
        return value
    if value is None:
        if required:
            raise InvalidFlavor(field, "is required")
        return None
    if not isinstance(value, str):
        raise InvalidFlavor(field, f"{value!r} is not a string")
    if required and not value.strip():
        raise InvalidFlavor(field, "is empty")
    if len(value) > max_length:
        raise InvalidFlavor(field, f"is longer than {max_length} characters")
    return value


# The fields of a GET /flavors/{id} body that POST /flavors takes, checked by the API's own schema.
_FIELD_IN_MESSAGE = re.compile(r"Invalid input for field/attribute (.+?)\. Value: ")
_BAD_NAME = "An invalid 'name' value was provided."
_CREATE_FIELDS = ("name", "id", "ram", "vcpus", "disk", EPHEMERAL, "swap", "rxtx_factor", IS_PUBLIC, "description")


def _nova_refusal(schema: Mapping[str, Any], body: Mapping[str, Any], where: str) -> None:
    """Raise InvalidFlavor with the flavor API's own message if its schema refuses ``body``."""
    from openkeel_compute.api import faults, validation

    try:
        validation.validate_body(schema, body)  # type: ignore[arg-type]
    except faults.BadRequest as refusal:
        named = _FIELD_IN_MESSAGE.match(refusal.message)
        field = named.group(1) if named else "name" if refusal.message.startswith(_BAD_NAME) else where
        raise InvalidFlavor(field, refusal.message) from None


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


def check_like_nova(body: Mapping[str, Any]) -> None:
    """Refuse what Nova 34.0.0 refuses: POST /flavors for the fields, POST .../os-extra_specs (2.86) for the specs.

    The schemas and the extra-spec validators are the API's own, so the messages are Nova's. Keys
    that no validator knows are accepted even inside Nova's namespaces: Nova stored them before 2.86.
    """
    from openkeel_compute.api.schemas import flavor_extra_specs, flavors

    create = {field: body[field] for field in _CREATE_FIELDS if field in body}
    if create.get("swap") == "":
        del create["swap"]  # no swap: what POST /flavors gets when swap is left out
    specs = body.get("extra_specs")
    if not _plainly_valid(create, specs):  # jsonschema costs ~1 ms a flavor: only when it may refuse
        _nova_refusal(flavors.create_v255, {"flavor": create}, "flavor")
        if specs and isinstance(specs, dict):
            _nova_refusal(flavor_extra_specs.create, {"extra_specs": specs}, "extra_specs")
    if not specs or not isinstance(specs, dict):
        return
    from openkeel_compute.extra_specs import InvalidExtraSpec, find_validator

    for key, value in specs.items():
        validator = find_validator(key)
        if validator is not None:
            try:
                validator.check(key, str(value))
            except InvalidExtraSpec as refusal:
                raise InvalidFlavor(key, refusal.message) from None


def parse_flavor(body: Mapping[str, Any]) -> Flavor:
    """Check a flavor dict and return it normalised; raise InvalidFlavor naming the culprit.

    The flavor API's own validation comes first (``check_like_nova``), so the messages are Nova's.
    """
    if not isinstance(body, dict):
        raise InvalidFlavor("flavor", f"expected an object, got {type(body).__name__}")
    if not _KNOWN_FIELDS.issuperset(body):
        raise InvalidFlavor(min(body.keys() - _KNOWN_FIELDS), "is not a field of a flavor")
    check_like_nova(body)
    flavor_id = _text(body, "id", required=True)
    name = _text(body, "name", required=True)
    assert flavor_id is not None and name is not None
    description = _text(body, "description", required=False, max_length=65535)
    swap = body.get("swap", "")
    if swap != "":
        swap = _int(body, "swap", 0)
    rxtx = body.get("rxtx_factor", 1.0)
    if not (type(rxtx) is float or type(rxtx) is int) or not math.isfinite(rxtx) or rxtx <= 0:
        raise InvalidFlavor("rxtx_factor", f"{rxtx!r} is not a positive number")
    specs = body.get("extra_specs", {})
    if not isinstance(specs, dict):
        raise InvalidFlavor("extra_specs", f"expected an object, got {type(specs).__name__}")
    for key, value in specs.items():
        if type(key) is str and type(value) is str and 0 < len(key) <= 255 and len(value) <= 255:
            continue
        if not isinstance(key, str) or not key or len(key) > 255:
            raise InvalidFlavor(f"extra_specs[{key!r}]", "a key must be a string of 1-255 characters")
        if not isinstance(value, str) or len(value) > 255:
            raise InvalidFlavor(key, f"value {value!r} is not a string of at most 255 characters")
    is_public = _bool(body, IS_PUBLIC, True)
    access_raw = body.get("access", ())
    if access_raw:
        if not isinstance(access_raw, list) or not all(isinstance(p, str) and p for p in access_raw):
            raise InvalidFlavor("access", "expected a list of project ids")
        if is_public:
            raise InvalidFlavor("access", "a public flavor has no access list")
        if len(set(access_raw)) != len(access_raw):
            raise InvalidFlavor("access", "lists a project twice")
    elif access_raw != () and access_raw != []:
        raise InvalidFlavor("access", "expected a list of project ids")
    return Flavor(  # positional, in field order: this runs for every flavor of a catalogue
        flavor_id,
        name,
        description,
        _int(body, "vcpus", 1),
        _int(body, "ram", 1),
        _int(body, "disk", 0),
        _int(body, EPHEMERAL, 0, default=0),
        swap,
        is_public,
        _bool(body, DISABLED, False),
        rxtx,
        dict(specs),
        tuple(access_raw),
    )
