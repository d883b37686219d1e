"""An in-memory Neutron v2.0 for tests: networks, subnets, ports, security groups, quotas and
extensions, answering the reads OpenKeel's API makes with Neutron's bodies and error shapes
(``{"NeutronError": {"type", "message", "detail"}}``). Every request is recorded (method, path,
query, headers) so that tests can check who called and with which token.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from wsgiref.simple_server import WSGIRequestHandler, make_server


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FakeNeutron:
    def __init__(self) -> None:
        self.networks: dict[str, dict] = {}
        self.subnets: dict[str, dict] = {}
        self.ports: dict[str, dict] = {}
        self.security_groups: dict[str, dict] = {}
        self.quotas: dict[str, dict] = {}
        self.extensions = [{"alias": "auto-allocated-topology", "name": "Auto Allocated Topology Services"}]
        self.auto_allocate_ok = True
        self.requests: list[dict] = []
        self.fail_with: int | None = None

    # -- data --------------------------------------------------------------------------------
    def network(self, project_id="demo", shared=False, subnet="10.0.0.0/24", **extra) -> dict:
        net = {"id": str(uuid.uuid4()), "name": extra.pop("name", "net"), "tenant_id": project_id,
               "project_id": project_id, "shared": shared, "admin_state_up": True, "subnets": [], **extra}
        self.networks[net["id"]] = net
        if subnet:
            sub = {"id": str(uuid.uuid4()), "network_id": net["id"], "cidr": subnet, "tenant_id": project_id}
            self.subnets[sub["id"]] = sub
            net["subnets"].append(sub["id"])
        return net

    def port(self, network: dict, project_id="demo", fixed_ips=None, **extra) -> dict:
        if fixed_ips is None:
            fixed_ips = [{"subnet_id": network["subnets"][0], "ip_address": f"10.0.0.{len(self.ports) + 10}"}] \
                if network["subnets"] else []
        port = {"id": str(uuid.uuid4()), "network_id": network["id"], "tenant_id": project_id,
                "project_id": project_id, "device_id": "", "device_owner": "", "fixed_ips": fixed_ips,
                "mac_address": "fa:16:3e:00:00:%02x" % (len(self.ports) % 256), "status": "DOWN", **extra}
        self.ports[port["id"]] = port
        return port

    def security_group(self, name: str, project_id="demo") -> dict:
        group = {"id": str(uuid.uuid4()), "name": name, "tenant_id": project_id, "project_id": project_id}
        self.security_groups[group["id"]] = group
        return group

    # -- HTTP --------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        path = environ["PATH_INFO"]
        self.requests.append({"method": environ["REQUEST_METHOD"], "path": path, "query": query,
                              "token": environ.get("HTTP_X_AUTH_TOKEN"),
                              "service_token": environ.get("HTTP_X_SERVICE_TOKEN")})
        status, body = self._answer(environ["REQUEST_METHOD"], path, query)
        data = json.dumps(body).encode()
        start_response(f"{status} X", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    @staticmethod
    def _error(status, kind, message):
        return status, {"NeutronError": {"type": kind, "message": message, "detail": ""}}

    @staticmethod
    def _filter(items, query, skip=("fields",)):
        out = []
        for item in items:
            ok = True
            for key, values in query.items():
                if key in skip:
                    continue
                if key == "fixed_ips":
                    wanted = {v.split("=", 1)[1] for v in values}
                    ok = ok and any(ip["ip_address"] in wanted for ip in item.get("fixed_ips", []))
                    continue
                have = item.get(key)
                if isinstance(have, bool):
                    have = str(have)
                ok = ok and str(have) in [v.capitalize() if v in ("true", "false") else v for v in values]
            if ok:
                out.append(item)
        return out

    def _answer(self, method, path, query):
        if self.fail_with:
            return self._error(self.fail_with, "Failure", "Request Failed: internal server error")
        parts = path.strip("/").split("/")
        if parts[:1] != ["v2.0"]:
            return 404, {"error": "not found"}
        parts = parts[1:]
        if method != "GET":
            return self._error(405, "HTTPMethodNotAllowed", "not allowed")
        if parts == ["networks"]:
            return 200, {"networks": self._filter(self.networks.values(), query)}
        if parts[0] == "networks" and len(parts) == 2:
            net = self.networks.get(parts[1])
            if net is None:
                return self._error(404, "NetworkNotFound", f"Network {parts[1]} could not be found.")
            return 200, {"network": net}
        if parts == ["ports"]:
            return 200, {"ports": self._filter(self.ports.values(), query)}
        if parts[0] == "ports" and len(parts) == 2:
            port = self.ports.get(parts[1])
            if port is None:
                return self._error(404, "PortNotFound", f"Port {parts[1]} could not be found.")
            return 200, {"port": port}
        if parts == ["security-groups"]:
            return 200, {"security_groups": self._filter(self.security_groups.values(), query)}
        if parts[0] == "quotas" and len(parts) == 2:
            return 200, {"quota": {"port": -1, "network": 100, **self.quotas.get(parts[1], {})}}
        if parts == ["extensions"]:
            return 200, {"extensions": self.extensions}
        if parts[0] == "auto-allocated-topology":
            if not self.auto_allocate_ok:
                return self._error(409, "AutoAllocationFailure",
                                   "Deployment error: No default router:external network.")
            return 200, {"auto_allocated_topology": {"dry-run": "pass"}}
        return 404, {"error": "not found"}

    # -- serving -----------------------------------------------------------------------------
    def serve(self):
        server = make_server("127.0.0.1", 0, self, handler_class=_Quiet)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        return server, f"http://127.0.0.1:{server.server_port}"
