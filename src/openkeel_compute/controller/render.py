"""No cluster: the desired objects as YAML files in a directory, one file per object.

``kubectl apply -f DIR`` applies them (namespace files sort first). The directory is kept in step the
same way a cluster is: the engine observes the files, plans, and writes or removes only what changed.
File names: ``<namespace|cluster>.<kind>.<name>.yaml``, namespaces as ``00-namespace.<name>.yaml``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection
from typing import Any

import yaml

from openkeel_compute.controller.desired import NAMESPACE, ObjectKey, key_of
from openkeel_compute.controller.kube import MANAGED_KINDS, NAMESPACED_KINDS, Observed
from openkeel_compute.kubevirt import kubeyaml

_KINDS = {kind.lower(): kind for kind in (*MANAGED_KINDS, NAMESPACE)}
_NAMESPACE_FILE = "00-namespace"
_CLUSTER = "cluster"

try:  # libyaml when present: ten thousand files load in a fraction of the time
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def file_name(key: ObjectKey) -> str:
    if key.kind == NAMESPACE:
        return f"{_NAMESPACE_FILE}.{key.name}.yaml"
    return f"{key.namespace or _CLUSTER}.{key.kind.lower()}.{key.name}.yaml"


def parse_file_name(name: str) -> ObjectKey | None:
    """The object a file holds, from its name; None for anything else in the directory.

    Object names may hold dots (``fl-m1.small``); namespaces and kinds never do, so the first two
    dots and the ``.yaml`` suffix delimit them. The kind says whether the first part is a namespace
    (a project may well be called ``cluster``).
    """
    if not name.endswith(".yaml"):
        return None
    stem = name[: -len(".yaml")]
    if stem.startswith(_NAMESPACE_FILE + "."):
        ns = stem[len(_NAMESPACE_FILE) + 1:]
        return ObjectKey(NAMESPACE, None, ns) if ns and "." not in ns else None
    parts = stem.split(".", 2)
    if len(parts) != 3 or not parts[2] or parts[1] not in _KINDS or _KINDS[parts[1]] == NAMESPACE:
        return None
    kind = _KINDS[parts[1]]
    if kind in NAMESPACED_KINDS:
        return ObjectKey(kind, parts[0], parts[2])
    return ObjectKey(kind, None, parts[2]) if parts[0] == _CLUSTER else None


class RenderBackend:
    """The directory as a cluster: reading parses files, writing replaces a file atomically."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, key: ObjectKey) -> str:
        return os.path.join(self.directory, file_name(key))

    def observe(self, names: Collection[str] | None = None) -> Observed:
        wanted = None if names is None else set(names)
        objects: dict[ObjectKey, dict[str, Any]] = {}
        for entry in os.listdir(self.directory):
            key = parse_file_name(entry)
            if key is None or (wanted is not None and key.kind != NAMESPACE and key.name not in wanted):
                continue
            try:
                with open(os.path.join(self.directory, entry), encoding="utf-8") as handle:
                    doc = yaml.load(handle, Loader=_Loader)
            except (OSError, yaml.YAMLError):
                doc = None
            if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
                objects[key] = doc
            else:  # unreadable: observed as a foreign object, so never overwritten blindly
                objects[key] = {"kind": key.kind, "metadata": {"name": key.name, "namespace": key.namespace}}
        return Observed(objects, None)

    def _write(self, body: dict[str, Any]) -> None:
        body = {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}}
        path = self._path(key_of(body))
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                kubeyaml.dump(body, handle)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    create = apply = replace = _write

    def delete(self, key: ObjectKey) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass

    def close(self) -> None:
        pass
