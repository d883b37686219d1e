"""One flavor value type, and the conversions the rooms need.

``Flavor`` is a flavor as GET /flavors/{id} shows it at microversion 2.61 (plus the access list of a
private flavor), checked and normalised. It is built from:

- an API body (``Flavor.from_api``): the structural checks (types, required fields, lower bounds),
  refusing with ``InvalidFlavor`` naming the field. Nova's own validation of POST /flavors (upper
  bounds, patterns, messages) belongs to the API (api/flavor_checks.py) and is passed to the mapping
  by whoever needs it (kubevirt.flavor.parse_flavor's ``check``);
- a database row of the catalogue with its extra specs and access list (``Flavor.from_row``);
- an entry of a server's frozen flavor copy (``Flavor.from_copy``: the same columns as a row, the
  extra specs inside), read as shared with the server's project when it is private.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

IS_PUBLIC = "os-flavor-access:is_public"
EPHEMERAL = "OS-FLV-EXT-DATA:ephemeral"
DISABLED = "OS-FLV-DISABLED:disabled"

KNOWN_FIELDS = frozenset(
    {"id", "name", "description", "ram", "disk", "vcpus", "swap", EPHEMERAL, DISABLED, IS_PUBLIC,
     "rxtx_factor", "extra_specs", "access", "links"}
)


class InvalidFlavor(ValueError):
    """A flavor refused; ``field`` names the field or extra-spec key at fault."""

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

    def for_project(self, project_id: str) -> Flavor:
        """A private flavor read as shared with ``project_id`` only (a server uses its project's copy)."""
        return self if self.is_public else self._replace(access=(project_id,))

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Flavor:
        return parse_api_body(body)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], extra_specs: Mapping[str, Any] | None = None,
                 access: Iterable[str] = ()) -> Flavor:
        """A catalogue row (``flavorid``, ``memory_mb``, ``root_gb``, ...) with its extra specs (the row's
        own ``extra_specs`` when not given) and the projects a private flavor is shared with."""
        return parse_api_body(api_body_of_row(row, extra_specs, access))

    @classmethod
    def from_copy(cls, entry: Mapping[str, Any], project_id: str) -> Flavor:
        """An entry of a server's frozen flavor copy (a serialised Flavor 1.2's fields, as
        compute.flavor_copy.FlavorCopy holds them), read as the server's project's."""
        return cls.from_row(entry).for_project(project_id)


def api_body_of_row(row: Mapping[str, Any], extra_specs: Mapping[str, Any] | None = None,
                    access: Iterable[str] = ()) -> dict[str, Any]:
    """A catalogue row (or a flavor copy entry) as GET /flavors/{id} shows it at 2.61, plus the access
    list of a private flavor: what ``Flavor.from_api`` reads."""
    specs = row.get("extra_specs") if extra_specs is None else extra_specs
    public = bool(row.get("is_public", True))
    rxtx = row.get("rxtx_factor")
    body: dict[str, Any] = {
        "id": str(row["flavorid"] if "flavorid" in row else row["id"]),
        "name": row["name"],
        "description": row.get("description"),
        "ram": row["memory_mb"],
        "disk": row["root_gb"],
        "vcpus": row["vcpus"],
        "swap": row.get("swap") or "",
        EPHEMERAL: row.get("ephemeral_gb") or 0,
        DISABLED: bool(row.get("disabled", False)),
        IS_PUBLIC: public,
        "rxtx_factor": float(rxtx) if rxtx is not None else 1.0,
        "extra_specs": {str(k): ("" if v is None else v) for k, v in (specs or {}).items()},
    }
    if not public:
        body["access"] = list(access)
    return body


def check_known_fields(body: Any) -> None:
    """An object whose fields are all a flavor's: the first check of every parse."""
    if not isinstance(body, dict):
        raise InvalidFlavor("flavor", f"expected an object, got {type(body).__name__}")
    if not KNOWN_FIELDS.issuperset(body):
        raise InvalidFlavor(min(body.keys() - KNOWN_FIELDS), "is not a field of a flavor")


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


def parse_api_body(body: Any) -> Flavor:
    """Check a flavor dict (the API's shape) and return it normalised; InvalidFlavor names the culprit."""
    check_known_fields(body)
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
