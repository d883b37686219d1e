"""Fixtures: the deploy/ overlays rendered once per session with kubectl's built-in kustomize.

Without a kubectl (or kustomize) whose kustomize is version 5 or later the tests skip with the
reason; OPENKEEL_REQUIRE_KUBECTL=1 makes that a failure (for CI machines that have one).
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("production", "dev")
NAMESPACE = "openkeel"


def _unavailable(reason: str) -> None:
    if os.environ.get("OPENKEEL_REQUIRE_KUBECTL") == "1":
        pytest.fail(reason + " and OPENKEEL_REQUIRE_KUBECTL=1", pytrace=False)
    pytest.skip(reason)


@functools.cache
def _renderer() -> list[str] | str:
    """The renderer's command, or why there is none."""
    reasons = []
    for tool, version_args, command in (("kubectl", ["version", "--client"], ["kustomize"]),
                                        ("kustomize", ["version"], ["build"])):
        path = shutil.which(tool)
        if path is None:
            continue
        out = subprocess.run([path, *version_args], check=False, capture_output=True, text=True, timeout=30).stdout
        found = re.search(r"(?:Kustomize Version: |^)v?(\d+)\.(\d+)", out, re.MULTILINE)
        if found and int(found.group(1)) >= 5:
            return [path, *command]
        reasons.append(f"{path} has kustomize {found.group(0) if found else '(none)'}")
    if not reasons:
        return "neither kubectl nor kustomize is installed: deploy/ is rendered with `kubectl kustomize`"
    return (", ".join(reasons) + ": the manifests need kustomize 5 or later (kubectl 1.27 or later; Debian 12's "
            "kubernetes-client 1.20 is too old)")


def renderer() -> list[str]:
    """The command that renders a kustomization directory (kubectl kustomize, else kustomize build)."""
    found = _renderer()
    if isinstance(found, str):
        _unavailable(found)
    return list(found)


def render(directory: pathlib.Path) -> list[dict[str, Any]]:
    done = subprocess.run([*renderer(), str(directory)], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"rendering {directory} failed: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


class Renders:
    """{name: [objects]}, each overlay rendered when first asked for: "production", "dev", and
    "production+servicemonitor" (the production overlay with the optional component, as docs/deploy.md
    tells an operator to add it)."""

    def __init__(self, scratch: pathlib.Path) -> None:
        self.scratch = scratch
        self.done: dict[str, list[dict[str, Any]]] = {}

    def __getitem__(self, name: str) -> list[dict[str, Any]]:
        if name not in self.done:
            self.done[name] = render(self._directory(name))
        return self.done[name]

    def _directory(self, name: str) -> pathlib.Path:
        if name in OVERLAYS:
            return DEPLOY / "overlays" / name
        assert name == "production+servicemonitor", name
        site = self.scratch / "monitored"
        site.mkdir(exist_ok=True)
        up = pathlib.Path(os.path.relpath(DEPLOY, site))
        (site / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": NAMESPACE,
            "resources": [str(up / "overlays" / "production")],
            "components": [str(up / "components" / "servicemonitor")]}))
        return site


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> Renders:
    return Renders(tmp_path_factory.mktemp("deploy"))


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The object of this kind whose name is ``name`` (generated ConfigMaps and Secrets: ``name-<hash>``)."""
    for obj in objects:
        meta_name = obj["metadata"]["name"]
        if obj["kind"] == kind and (meta_name == name or re.fullmatch(re.escape(name) + r"-[a-z0-9]{10}", meta_name)):
            return obj
    raise AssertionError(f"no {kind} {name} among {[(o['kind'], o['metadata']['name']) for o in objects]}")
