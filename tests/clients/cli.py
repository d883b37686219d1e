"""The openstack client run as an operator runs it, against a served API."""

from __future__ import annotations

import json
import os
import subprocess

from tests.clients.conftest import BIN

COMPUTE_VERSION = "2.86"  # extra-spec validation (scenario 1: "validate against the registry")


CLI_TIMEOUT = 120


class Cli:
    def __init__(self, server, tmp_path):
        clouds = tmp_path / "clouds.yaml"
        clouds.write_text(
            "clouds:\n"
            "  openkeel:\n"
            "    auth_type: admin_token\n"
            "    auth:\n"
            "      token: 'admin:admin'\n"
            f"      endpoint: {server.url}\n"
            f"    compute_endpoint_override: {server.url}\n"
            f"    compute_api_version: '{COMPUTE_VERSION}'\n"
            "    identity_api_version: '3'\n"
            f"    identity_endpoint_override: {server.url.removesuffix('/v2.1')}/identity/v3\n"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        self.env.update(OS_CLIENT_CONFIG_FILE=str(clouds), OS_CLOUD="openkeel", PYTHONWARNINGS="ignore",
                        HOME=str(tmp_path))
        self.exe = str(BIN / "openstack")

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], check=False, env=self.env, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)

    def ok(self, *args: str):
        """Run one command that must succeed; its parsed -f json output (or None if it printed nothing)."""
        got = self.run(*args)
        assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stderr}"
        return json.loads(got.stdout) if got.stdout.strip() else None

    def session(self, *commands: str) -> tuple[list, str]:
        """Several commands in one interactive CLI session: one parsed JSON document per command
        that printed one, in order, and everything the session wrote to stderr."""
        got = subprocess.run([self.exe], check=False, input="\n".join(commands) + "\n", env=self.env,
                             capture_output=True, text=True, timeout=CLI_TIMEOUT)
        decoder, docs, text, pos = json.JSONDecoder(), [], got.stdout, 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            doc, pos = decoder.raw_decode(text, pos)
            docs.append(doc)
        return docs, got.stderr
