"""``openkeel-compute flavor ...``: convert flavors to KubeVirt objects, explain them, import instancetypes.

Other modules add sub-commands to the group with ``add_flavor_subcommand`` (the controller's
``flavor status``, for instance), before or after ``register`` ran:

    add_flavor_subcommand("status", "show reconcile status", setup=lambda p: p.add_argument("id"), func=run)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any

import yaml

from openkeel_compute.api.flavor_checks import check_fields
from openkeel_compute.kubevirt import kubeyaml
from openkeel_compute.kubevirt.flavor import InvalidFlavor
from openkeel_compute.kubevirt.guard import RefusedByKubeVirt
from openkeel_compute.kubevirt.mapping import ANN_ID, FlavorObjects, flavor_to_kubevirt
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions
from openkeel_compute.kubevirt.reverse import (
    IncompleteObjects,
    NotAnInstancetype,
    import_instancetype,
    objects_to_flavor,
)
from openkeel_compute.kubevirt.vectors import VECTOR_OPTIONS, VECTORS

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: catalogues are big
Setup = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]

# name -> (help, setup, func): the documented registry of the group's sub-commands.
FLAVOR_SUBCOMMANDS: dict[str, tuple[str, Setup, Run]] = {}
_group: Any = None  # the flavor group's sub-parsers once register() ran


def add_flavor_subcommand(name: str, help: str, setup: Setup, func: Run) -> None:
    """Add ``openkeel-compute flavor <name>``; ``setup`` adds its arguments, ``func`` runs it."""
    FLAVOR_SUBCOMMANDS[name] = (help, setup, func)
    if _group is not None:
        _add(_group, name, help, setup, func)


def _add(group: Any, name: str, help: str, setup: Setup, func: Run) -> None:
    parser = group.add_parser(name, help=help, description=help)
    setup(parser)
    parser.set_defaults(func=func)


def register(subparsers: Any) -> None:
    """Add the ``flavor`` command group to the openkeel-compute parser."""
    global _group
    parser = subparsers.add_parser("flavor", help="flavor <-> KubeVirt mapping tools",
                                   description="Flavor <-> KubeVirt instancetype mapping tools.")
    _group = parser.add_subparsers(dest="flavor_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    for name, (help_text, setup, func) in FLAVOR_SUBCOMMANDS.items():
        _add(_group, name, help_text, setup, func)


def _options(args: argparse.Namespace) -> MappingOptions:
    if getattr(args, "config_file", None):
        from oslo_config import cfg

        from openkeel_compute.conf.kubevirt import mapping_options, register_opts

        conf = cfg.ConfigOpts()
        register_opts(conf)
        conf([], project="openkeel-compute", default_config_files=[args.config_file])
        return mapping_options(conf)
    return DEFAULT_OPTIONS


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _flavors(path: str) -> list[Any]:
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise InvalidFlavor(path, f"not JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("flavor"), dict):
        data = data["flavor"]  # a GET /flavors/{id} response body as it is
    if isinstance(data, dict) and isinstance(data.get("flavors"), list):
        data = data["flavors"]
    return [_as_api_body(flavor) for flavor in (data if isinstance(data, list) else [data])]


# What `openstack flavor show -f json` prints where the API body has something else.
_CLIENT_FIELDS = {"properties": "extra_specs", "access_project_ids": "access"}
_CLIENT_NULLS = ("OS-FLV-DISABLED:disabled", "rxtx_factor")  # the client prints null for "not given"
# The columns of `openstack flavor list [--long] -f json`, and the API fields they show.
_LIST_COLUMNS = {"ID": "id", "Name": "name", "RAM": "ram", "Disk": "disk", "Ephemeral": "OS-FLV-EXT-DATA:ephemeral",
                 "VCPUs": "vcpus", "Is Public": "os-flavor-access:is_public", "Swap": "swap",
                 "RXTX Factor": "rxtx_factor", "Properties": "properties"}


def _as_api_body(flavor: Any) -> Any:
    """An API flavor body from what the user gave: a body as it is, or ``openstack flavor show -f json``.

    ``openstack flavor list [--long] -f json`` rows are read too. An API body without
    ``extra_specs`` (GET /flavors/{id} before microversion 2.61: it has ``links``; or a list row
    without --long) is taken as a flavor without extra specs, and says so on stderr: its real extra
    specs may be missing from the result. A hand-written flavor without them has none.
    """
    if not isinstance(flavor, dict):
        return flavor
    if {"ID", "Name"} <= flavor.keys() and flavor.keys() <= _LIST_COLUMNS.keys():
        flavor = {_LIST_COLUMNS[column]: value for column, value in flavor.items()}
        flavor.setdefault("properties", None)  # a list without --long: extra specs not shown
        flavor.setdefault("links", [])  # and from the API
    if _CLIENT_FIELDS.keys() & flavor.keys():
        body = {}
        for key, value in flavor.items():
            if key in _CLIENT_FIELDS:
                if value is not None:
                    body[_CLIENT_FIELDS[key]] = value
            elif not (key in _CLIENT_NULLS and value is None):
                body[key] = value
        flavor = body
    if "extra_specs" not in flavor and "links" in flavor:
        print(f"warning: flavor {flavor.get('id', '?')}: no extra_specs in the body (the API shows them from "
              "microversion 2.61; openstack flavor show, or flavor list --long, shows them as properties): taken "
              "as a flavor without extra specs", file=sys.stderr)
    return flavor


def _convert_all(flavors: Iterable[Any], options: MappingOptions) -> list[FlavorObjects]:
    results = []
    for index, flavor in enumerate(flavors):
        try:
            results.append(flavor_to_kubevirt(flavor, options, check=check_fields))
        except InvalidFlavor as exc:
            where = flavor.get("id", index) if isinstance(flavor, dict) else index
            exc.args = (f"flavor {where}: {exc}",)
            raise
    return results


def _dump_objects(results: list[FlavorObjects], out: IO[str], with_vm: bool) -> None:
    first = True
    for result in results:
        docs: list[dict[str, Any]] = result.documents()
        if with_vm:
            docs.append(result.vm)
        for entry in result.untranslated:
            note = f"{result.flavor.id}: {entry.key}={entry.value} [{entry.fidelity}] {entry.note}"
            out.write(kubeyaml.comment(note))
        for doc in docs:
            if not first:
                out.write("---\n")
            first = False
            kubeyaml.dump(doc, out)


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.vectors:
        results = _convert_all(VECTORS.values(), VECTOR_OPTIONS)
    elif args.file is None:
        print("error: give FILE (a flavor or a JSON list of flavors, - for stdin) or --vectors", file=sys.stderr)
        return 2
    else:
        results = _convert_all(_flavors(args.file), _options(args))
    _dump_objects(results, sys.stdout, args.vm)
    return 0


def _setup_convert(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="flavor JSON or a list of them; - reads stdin")
    parser.add_argument("--vectors", action="store_true", help="convert the six reference flavors")
    parser.add_argument("--vm", action="store_true", help="also print each VirtualMachine fragment")
    parser.add_argument("--config-file", help="openkeel-compute config with a [kubevirt] section")


def explain_table(result: FlavorObjects) -> str:
    """A readable table of what KubeVirt will and will not honour for one flavor."""
    rows = [(e.key, e.value, str(e.fidelity), e.note or e.target) for e in result.report]
    header = ("KEY", "VALUE", "FIDELITY", "WHAT KUBEVIRT DOES")
    widths = [max([len(header[i])] + [min(len(r[i]), 40) for r in rows]) for i in range(3)]
    lines = [f"flavor {result.flavor.id} ({result.flavor.name}) -> {result.name}",
             "  ".join(h.ljust(w) for h, w in zip(header, [*widths, 0], strict=True)).rstrip()]
    for row in rows:
        cells = [row[i] if len(row[i]) <= 40 else row[i][:37] + "..." for i in range(3)]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + row[3])
    if not rows:
        lines.append("(nothing to report: every field is exact)")
    return "\n".join(lines) + "\n"


def _cmd_explain(args: argparse.Namespace) -> int:
    flavors = list(VECTORS.values()) if args.vectors else _flavors(args.file)
    options = VECTOR_OPTIONS if args.vectors else _options(args)
    sys.stdout.write("\n".join(explain_table(r) for r in _convert_all(flavors, options)))
    return 0


def _setup_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="flavor JSON; - reads stdin")
    parser.add_argument("--vectors", action="store_true", help="explain the six reference flavors")
    parser.add_argument("--config-file", help="openkeel-compute config with a [kubevirt] section")


_PREFERENCE_KINDS = {"VirtualMachineClusterPreference": True, "VirtualMachinePreference": False}
_INSTANCETYPE_KINDS = {"VirtualMachineClusterInstancetype": True, "VirtualMachineInstancetype": False}


def import_documents(docs: Iterable[Any], options: MappingOptions) -> tuple[list[dict[str, Any]], list[str]]:
    """Flavors for the instancetypes among docs (paired with same-named preferences) and the notes."""
    preferences: dict[tuple[bool, Any, Any], dict[str, Any]] = {}
    instancetypes: list[dict[str, Any]] = []
    notes: list[str] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        if kind in _PREFERENCE_KINDS:
            preferences[(_PREFERENCE_KINDS[kind], meta.get("namespace"), meta.get("name"))] = doc
        elif kind in _INSTANCETYPE_KINDS:
            instancetypes.append(doc)
        else:
            notes.append(f"{kind}/{meta.get('name')}: not an instancetype or preference, skipped")
    flavors: list[dict[str, Any]] = []
    used: set[tuple[bool, Any, Any]] = set()
    openkeel: dict[str, list[dict[str, Any]]] = {}
    for doc in instancetypes:
        meta = doc.get("metadata") or {}
        key = (_INSTANCETYPE_KINDS[doc["kind"]], meta.get("namespace"), meta.get("name"))
        used.add(key)
        flavor_id = (meta.get("annotations") or {}).get(ANN_ID)
        if flavor_id is not None:
            openkeel.setdefault(flavor_id, []).append(doc)
            continue
        result = import_instancetype(doc, preferences.get(key), options, check=check_fields)
        flavors.append(result.flavor)
        notes.extend(f"{meta.get('name')}: {path}: {why}" for path, why in result.lost)
    for copies in openkeel.values():
        try:
            flavors.append(objects_to_flavor(copies))
        except IncompleteObjects as exc:
            notes.append(f"{exc}, skipped")
    notes.extend(f"{name}: preference without an instancetype of the same name: an image's settings, "
                 "not a flavor" for (_cluster, _ns, name) in preferences.keys() - used)
    return flavors, notes


def _cmd_import(args: argparse.Namespace) -> int:
    try:
        docs = list(yaml.load_all(_read(args.file), Loader=_YAML_LOADER))
    except yaml.YAMLError as exc:
        print(f"error: {args.file}: not YAML: {exc}", file=sys.stderr)
        return 1
    if not any(isinstance(d, dict) and d.get("kind") in _INSTANCETYPE_KINDS for d in docs):
        kinds = sorted({str(d.get("kind") or "no kind") if isinstance(d, dict) else type(d).__name__
                        for d in docs if d is not None})
        hint = " (a flavor? 'flavor convert' reads flavors)" if kinds == ["no kind"] else ""
        print(f"error: {args.file}: no VirtualMachineClusterInstancetype or VirtualMachineInstancetype in it; "
              f"kinds found: {', '.join(kinds) or 'none'}{hint}", file=sys.stderr)
        return 1
    flavors, notes = import_documents(docs, _options(args))
    json.dump(flavors, sys.stdout, indent=2)
    sys.stdout.write("\n")
    for note in notes:
        print(f"# lost: {note}", file=sys.stderr)
    return 0


def _setup_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.yaml", help="instancetypes and preferences; - reads stdin")
    parser.add_argument("--config-file", help="openkeel-compute config with a [kubevirt] section")


def _guarded(func: Run) -> Run:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (InvalidFlavor, NotAnInstancetype, RefusedByKubeVirt, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run


add_flavor_subcommand("convert", "print the KubeVirt objects of flavors as kubectl-ready YAML",
                      _setup_convert, _guarded(_cmd_convert))
add_flavor_subcommand("explain", "show what KubeVirt will and will not honour of each flavor",
                      _setup_explain, _guarded(_cmd_explain))
add_flavor_subcommand("import-instancetypes", "print the flavors (JSON) that reproduce instancetypes",
                      _setup_import, _guarded(_cmd_import))
