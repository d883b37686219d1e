"""Derive the emulator's compact KubeVirt v1.9.0 schema from KubeVirt's OpenAPI (swagger 2.0) document.

    python tools/kubevirt_schema.py [SWAGGER] [OUTPUT]

SWAGGER defaults to ../shared/kubevirt/swagger.json, OUTPUT to the file the emulator reads
(src/openkeel_compute/emulator/kubevirt-v1.9.0-schema.json). Only what validation needs is kept:
the definitions reachable from the kinds the emulator serves, with their types, properties, items,
map value types and required fields (descriptions and formats are dropped). The output is
deterministic, so tests/emulator/test_schema.py can check that the committed file is current.
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SWAGGER = ROOT.parent / "shared" / "kubevirt" / "swagger.json"
DEFAULT_OUTPUT = ROOT / "src" / "openkeel_compute" / "emulator" / "kubevirt-v1.9.0-schema.json"
SOURCE = "KubeVirt v1.9.0 OpenAPI (swagger.json)"

# kind -> definition in the swagger document. DataVolume is CDI's; KubeVirt's document carries its
# spec (the dataVolumeTemplates of a VM use it), so the emulator builds DataVolume from that spec.
ROOTS = {
    "VirtualMachine": "v1.VirtualMachine",
    "VirtualMachineInstance": "v1.VirtualMachineInstance",
    "VirtualMachineInstancetype": "v1beta1.VirtualMachineInstancetype",
    "VirtualMachineClusterInstancetype": "v1beta1.VirtualMachineClusterInstancetype",
    "VirtualMachinePreference": "v1beta1.VirtualMachinePreference",
    "VirtualMachineClusterPreference": "v1beta1.VirtualMachineClusterPreference",
    "DataVolumeSpec": "v1beta1.DataVolumeSpec",
    "VirtualMachineInstanceMigration": "v1.VirtualMachineInstanceMigration",
    "MigrationPolicy": "v1alpha1.MigrationPolicy",
    # the bodies of the subresources.kubevirt.io verbs
    "AddVolumeOptions": "v1.AddVolumeOptions",
    "RemoveVolumeOptions": "v1.RemoveVolumeOptions",
    "MigrateOptions": "v1.MigrateOptions",
    "ObjectMeta": "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta",
}
KEEP = ("type", "properties", "items", "additionalProperties", "required", "$ref")
PREFIX = "#/definitions/"


def _compact(node: dict, refs: set[str]) -> dict:
    out: dict = {}
    for key in KEEP:
        if key not in node:
            continue
        value = node[key]
        if key == "$ref":
            name = value[len(PREFIX):]
            refs.add(name)
            out[key] = name
        elif key == "properties":
            out[key] = {name: _compact(sub, refs) for name, sub in sorted(value.items())}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _compact(value, refs)
        elif key == "required":
            out[key] = sorted(value)
        else:
            out[key] = value
    return out


def build(swagger: dict) -> dict:
    definitions = swagger["definitions"]
    todo = list(ROOTS.values())
    done: dict[str, dict] = {}
    while todo:
        name = todo.pop()
        if name in done:
            continue
        refs: set[str] = set()
        done[name] = _compact(definitions[name], refs)
        todo.extend(sorted(refs - done.keys()))
    return {"source": SOURCE, "roots": ROOTS, "definitions": dict(sorted(done.items()))}


def render(schema: dict) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n"


def main(argv: list[str]) -> int:
    swagger_path = pathlib.Path(argv[1]) if len(argv) > 1 else DEFAULT_SWAGGER
    output = pathlib.Path(argv[2]) if len(argv) > 2 else DEFAULT_OUTPUT
    schema = build(json.loads(swagger_path.read_text()))
    output.write_text(render(schema))
    print(f"{output}: {len(schema['definitions'])} definitions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
