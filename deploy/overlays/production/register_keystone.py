"""Register OpenKeel compute in Keystone: the compute service, its endpoints, its service user.

Run by the Job openkeel-compute-keystone-registration with the image's Python (keystoneauth1 is
installed with openkeel-compute). Idempotent: what exists is kept, an endpoint whose URL changed
is updated. Admin credentials come from the usual OS_* variables; the rest from:

    REGION, PUBLIC_URL, INTERNAL_URL          the endpoints of service type "compute"
    SERVICE_USERNAME, SERVICE_PASSWORD        the user keystonemiddleware and [service_user] use
    SERVICE_PROJECT, SERVICE_DOMAIN           its project (role "service") and domain
"""

from __future__ import annotations

import os
import sys
from typing import Any

from keystoneauth1 import session
from keystoneauth1.identity import v3

IDENTITY = {"service_type": "identity", "interface": "public", "version": (3, 0)}


class Keystone:
    def __init__(self, sess: session.Session) -> None:
        self.sess = sess

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.sess.request(path, method, endpoint_filter=IDENTITY, **kwargs)
        return response.json() if response.content else {}

    def find(self, collection: str, **query: str) -> dict[str, Any] | None:
        found = self._call("GET", f"/{collection}", params=query)[collection]
        return found[0] if found else None

    def ensure(self, collection: str, member: str, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        existing = self.find(collection, **query)
        if existing is not None:
            return existing
        created = self._call("POST", f"/{collection}", json={member: body})[member]
        print(f"created {member} {created['id']} ({query})")
        return created


def register(keystone: Keystone, env: dict[str, str]) -> None:
    region = env["REGION"]
    service = keystone.ensure("services", "service", {"type": "compute", "name": "nova"},
                              {"type": "compute", "name": "nova", "description": "OpenKeel compute"})
    for interface, url in (("public", env["PUBLIC_URL"]), ("internal", env["INTERNAL_URL"])):
        query = {"service_id": service["id"], "interface": interface, "region_id": region}
        endpoint = keystone.ensure("endpoints", "endpoint", query, {**query, "url": url})
        if endpoint["url"] != url:
            keystone._call("PATCH", f"/endpoints/{endpoint['id']}", json={"endpoint": {"url": url}})
            print(f"updated the {interface} endpoint: {url}")
    domain = keystone.find("domains", name=env["SERVICE_DOMAIN"])
    if domain is None:
        sys.exit(f"domain {env['SERVICE_DOMAIN']} not found")
    project = keystone.ensure("projects", "project", {"name": env["SERVICE_PROJECT"], "domain_id": domain["id"]},
                              {"name": env["SERVICE_PROJECT"], "domain_id": domain["id"]})
    user = keystone.ensure("users", "user", {"name": env["SERVICE_USERNAME"], "domain_id": domain["id"]},
                           {"name": env["SERVICE_USERNAME"], "domain_id": domain["id"],
                            "password": env["SERVICE_PASSWORD"], "enabled": True})
    # The password Secret is the truth: set it again, so that a rotated Secret takes effect.
    keystone._call("PATCH", f"/users/{user['id']}", json={"user": {"password": env["SERVICE_PASSWORD"]}})
    role = keystone.ensure("roles", "role", {"name": "service"}, {"name": "service"})
    keystone._call("PUT", f"/projects/{project['id']}/users/{user['id']}/roles/{role['id']}")
    print(f"compute service {service['id']} registered in region {region}; user {user['name']} has role service "
          f"in project {project['name']}")


def main() -> None:
    env = dict(os.environ)
    auth = v3.Password(auth_url=env["OS_AUTH_URL"], username=env["OS_USERNAME"], password=env["OS_PASSWORD"],
                       project_name=env.get("OS_PROJECT_NAME", "admin"),
                       user_domain_name=env.get("OS_USER_DOMAIN_NAME", "Default"),
                       project_domain_name=env.get("OS_PROJECT_DOMAIN_NAME", "Default"))
    register(Keystone(session.Session(auth=auth)), env)


if __name__ == "__main__":
    main()
