"""A rendered Deployment's or Job's container, run on this machine as its pod would run it.

Each volume mount of the container becomes a directory under a scratch directory: a ConfigMap
volume holds the ConfigMap's files as rendered, an emptyDir is empty, and the ServiceAccount mount
the kubelet adds (``automountServiceAccountToken``) holds a token, a CA bundle and the namespace.
Paths under a mount point, in the container's arguments and in the mounted configuration files, are
rewritten to those directories: that is all a mount does. The environment is the container's
``env``: values, ``fieldRef`` (the pod's name and namespace) and ``secretKeyRef`` from the Secrets
the overlay renders or the test gives (an operator's Secrets); a required key nobody gives fails,
as the kubelet refuses to start such a pod. The image's entry point is ``openkeel-compute``.
"""

from __future__ import annotations

import base64
import os
import pathlib
import re
import sys
from typing import Any

import certifi

from tests.deploy.conftest import NAMESPACE, find
from tests.serve.cli import command

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def unhashed(name: str) -> str:
    """A generated object's name without the hash Kustomize appends (``name-<10 characters>``)."""
    return re.sub(r"-[a-z0-9]{10}$", "", name)


def rendered_secrets(objects: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """{(Secret name without its hash, key): value} of the Secrets an overlay generates."""
    found = {}
    for obj in objects:
        if obj["kind"] == "Secret":
            name = unhashed(obj["metadata"]["name"])
            found.update({(name, key): base64.b64decode(value).decode() for key, value in obj["data"].items()})
    return found


class Pod:
    def __init__(self, objects: list[dict[str, Any]], kind: str, name: str, scratch: pathlib.Path,
                 secrets: dict[tuple[str, str], str], pod_name: str | None = None, container: str | None = None) -> None:
        """``container``: one of the pod's containers or init containers by name (default: its only container)."""
        self.name = pod_name or f"{name}-5d8f9c7b6-x2x4q"
        self.scratch = scratch
        spec = find(objects, kind, name)["spec"]["template"]["spec"]
        if container is None:
            (self.container,) = spec["containers"]
        else:
            (self.container,) = [c for c in spec.get("initContainers", []) + spec["containers"]
                                 if c["name"] == container]
        self.secrets = {**rendered_secrets(objects), **secrets}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        self.mounts: dict[str, pathlib.Path] = {}
        for mount in self.container.get("volumeMounts", []):
            directory = scratch / mount["name"]
            directory.mkdir(parents=True, exist_ok=True)
            self.mounts[mount["mountPath"]] = directory
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                config = next(o for o in objects if o["kind"] == "ConfigMap"
                              and o["metadata"]["name"] == volume["configMap"]["name"])
                for key, text in config["data"].items():
                    (directory / key).write_text(text)
        if spec.get("automountServiceAccountToken", True):
            account = scratch / "serviceaccount"
            account.mkdir(exist_ok=True)
            (account / "token").write_text("token-of-the-service-account")
            (account / "ca.crt").write_text(pathlib.Path(certifi.where()).read_text())  # plain HTTP here
            (account / "namespace").write_text(NAMESPACE)
            self.mounts[SERVICE_ACCOUNT_DIR] = account
        for directory in self.mounts.values():
            for path in directory.iterdir():
                if path.is_file() and path.suffix in (".conf", ".kubeconfig"):
                    path.write_text(self.local(path.read_text()))

    def local(self, text: str) -> str:
        """``text`` with every path under a mount point pointed at its directory here."""
        # One pass, so that a directory here (under /tmp) is not taken for the pod's /tmp again.
        pattern = "|".join(re.escape(p) for p in sorted(self.mounts, key=len, reverse=True))
        return re.sub(f"({pattern})(?![\\w.-])", lambda m: str(self.mounts[m.group(1)]), text)

    def file(self, mount_path: str, key: str) -> pathlib.Path:
        return self.mounts[mount_path] / key

    def edit(self, mount_path: str, key: str, old: str, new: str) -> None:
        """Replace ``old`` (which must be there) by ``new`` in a mounted file."""
        path = self.file(mount_path, key)
        text = path.read_text()
        assert old in text, f"{old!r} is not in {key}:\n{text}"
        path.write_text(text.replace(old, new))

    def argv(self) -> list[str]:
        """The container's command, or the image's entry point with its arguments."""
        if "command" in self.container:
            return [self.local(arg) for arg in self.container["command"] + self.container.get("args", [])]
        return [*command(), *(self.local(arg) for arg in self.container["args"])]

    def port(self, name: str) -> int:
        """The container port called ``name`` (a probe's or a Service's target)."""
        (number,) = [p["containerPort"] for p in self.container.get("ports", []) if p["name"] == name]
        return number

    def environ(self, **extra: str) -> dict[str, str]:
        """This process's environment without OS_* variables, then the container's, then ``extra``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["PYTHONWARNINGS"] = "ignore"
        # The image has openkeel-compute on its PATH (a container's command may call it by name).
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        fields = {"metadata.name": self.name, "metadata.namespace": NAMESPACE}
        for item in self.container.get("env", []):
            source = item.get("valueFrom", {})
            if "value" in item:
                env[item["name"]] = item["value"]
            elif "fieldRef" in source:
                env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                value = self.secrets.get((unhashed(ref["name"]), ref["key"]))
                assert value is not None or ref.get("optional"), f"no Secret {ref['name']} key {ref['key']}"
                if value is not None:
                    env[item["name"]] = value
            else:
                raise AssertionError(f"unexpected env source {item}")
        env.update(extra)
        return env
