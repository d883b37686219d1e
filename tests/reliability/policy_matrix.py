"""The persona × operation matrix: every operation the router serves, called by an administrator,
a member and a reader of the project that owns the objects, a member and a reader of another
project, and a caller without a token. A leak is an answer that gives a caller what its roles
do not allow:

- without a token, anything but 401 from an API route (the version documents aside);
- from another project, a 2xx on the owner's server, quota or private flavor, or a list that
  shows the owner's server or private flavor;
- from a non-administrator, a 2xx on an administrator's operation (flavor and quota-class writes,
  quota changes, migrations, state resets, forced deletes and the other admin server actions);
- from a reader, a 2xx on a write to the owner's server.
"""

from __future__ import annotations

import dataclasses
import json

from tests.reliability import fuzz
from tests.reliability import world as w

PERSONAS = {
    "admin": {"X-Auth-Token": w.ADMIN},
    "owner-member": {"X-Auth-Token": w.OWNER},
    "owner-reader": {"X-Auth-Token": "rita:demo", "X-Roles": "reader"},
    "other-member": {"X-Auth-Token": w.OTHER},
    "other-reader": {"X-Auth-Token": "otto:other", "X-Roles": "reader"},
    "no-token": {},
}
_ADMIN_ACTIONS = {"os-resetState", "injectNetworkInfo", "resetNetwork", "forceDelete", "os-migrateLive",
                  "migrate", "addTenantAccess", "removeTenantAccess"}
_OWNED = (w.SERVER, w.FLAVOR_PRIVATE, "/os-quota-sets/demo")
_VERSIONS = ("2.1", "2.47", "2.75", "2.96", "latest")


@dataclasses.dataclass
class Report:
    probes: int = 0
    leaks: list[str] = dataclasses.field(default_factory=list)
    granted: dict[str, int] = dataclasses.field(default_factory=dict)  # 2xx answers per persona

    def line(self, engine: str) -> str:
        return f"policy[{engine}]: probes={self.probes} leaks={len(self.leaks)} granted={self.granted}"


def _admin_only(template: str, method: str, action: str | None) -> bool:
    if action in _ADMIN_ACTIONS:
        return True
    if template.startswith("/flavors") and method in ("POST", "PUT", "DELETE") and not template.endswith("/action"):
        return True
    if template.startswith(("/os-quota-sets", "/os-quota-class-sets")) and method in ("PUT", "DELETE"):
        return True
    if template in ("/os-simple-tenant-usage", "/os-baremetal-nodes", "/os-baremetal-nodes/{node_id}") or (
            template.startswith("/os-instance_usage_audit_log")):
        return True
    return template.startswith("/os-migrations") or template.endswith("/migrations") or "{migration_id}" in template


def _leak(persona: str, template: str, method: str, action: str | None, path: str, answer: w.Answer) -> str | None:
    ok = 200 <= answer.status < 300
    if persona == "no-token":
        if template not in ("/", "/versions/{id}") and answer.status != 401:
            return "answered without a token"
        return None
    if persona.startswith("other"):
        if ok and any(owned in path for owned in _OWNED) and not path.endswith("/defaults"):  # defaults: anyone
            return "another project reached the owner's object"
        if ok and answer.body and (w.SERVER.encode() in answer.body or w.FLAVOR_PRIVATE.encode() in answer.body):
            return "another project was shown the owner's object"
    if persona != "admin" and ok and _admin_only(template, method, action):
        return "a non-administrator ran an administrator's operation"
    if persona == "owner-reader" and ok and method != "GET" and w.SERVER in path:
        return "a reader changed the owner's server"
    return None


def _body(template: str, method: str, action: str | None, op) -> bytes:
    if method not in ("POST", "PUT"):
        return b""
    rng = fuzz.random.Random(f"{method} {template} {action}")  # the same body on every run and engine
    sample = fuzz._sample_value(op.schema_for(op.body, op.versions[1]) or {}, rng) if op.body else {}
    if action is not None and (not isinstance(sample, dict) or action not in sample):
        sample = {action: sample}
    return json.dumps(sample).encode()


def run(world: w.World, versions: tuple[str, ...] = _VERSIONS) -> Report:
    """Every operation at ``versions``, for every persona; restocked between personas."""
    report = Report()
    real = fuzz._real_values()
    for persona, headers in PERSONAS.items():
        world.restock()
        for template, method, action, op in fuzz.operations():
            path = template
            for name, values in real.items():
                path = path.replace("{" + name + "}", values[0])
            body = _body(template, method, action, op)
            for version in versions:
                sent = {**headers, "OpenStack-API-Version": f"compute {version}"}
                if body:
                    sent["Content-Type"] = "application/json"
                answer = w.call(world.app, method, "/v2.1" + path, headers=sent, body=body)
                report.probes += 1
                if 200 <= answer.status < 300:
                    report.granted[persona] = report.granted.get(persona, 0) + 1
                reason = _leak(persona, template, method, action, path, answer)
                if reason:
                    report.leaks.append(f"{persona} {method} {path} {action or ''} @{version}: "
                                        f"{answer.status} {reason}")
    return report
