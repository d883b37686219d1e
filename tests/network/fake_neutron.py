"""An in-memory Neutron v2.0 for tests: networks, subnets, ports, security groups and their rules,
floating IPs, quotas and extensions, answering the reads and the writes OpenKeel's API makes with
Neutron's bodies, checks and error shapes (``{"NeutronError": {"type", "message", "detail"}}``, and an
``X-Openstack-Request-Id`` on every answer). Every request is recorded (method, path, query, headers,
body) so that tests can check who called, with which token and what was sent.
"""

from __future__ import annotations

import ipaddress
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
        self.floating_ips: dict[str, dict] = {}
        self.extensions = [{"alias": "auto-allocated-topology", "name": "Auto Allocated Topology Services"}]
        self.auto_allocate_ok = True
        self.requests: list[dict] = []
        self.fail_with: int | None = None
        self.security_group_quota = 10
        self.floating_ip_quota = 10
        self.request_count = 0
        #: hosts with an alive L2 agent: a port bound elsewhere gets binding:vif_type binding_failed
        self.agent_hosts: set[str] | None = None
        #: where Neutron's nova notifier posts events (a callable taking the event list), as ML2's
        #: notify_nova_on_port_status_changes / _data_changes would; None: no notifier
        self.notify = None
        self.body: dict | None = None

    # -- data --------------------------------------------------------------------------------
    def network(self, project_id="demo", shared=False, subnet="10.0.0.0/24", **extra) -> dict:
        net = {"id": str(uuid.uuid4()), "name": extra.pop("name", "net"), "tenant_id": project_id,
               "project_id": project_id, "shared": shared, "admin_state_up": True, "subnets": [], **extra}
        self.networks[net["id"]] = net
        if subnet:
            sub = {"id": str(uuid.uuid4()), "network_id": net["id"], "cidr": subnet, "tenant_id": project_id,
                   "ip_version": 4, "gateway_ip": str(next(ipaddress.ip_network(subnet).hosts())),
                   "dns_nameservers": [], "host_routes": [], "enable_dhcp": True}
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

    def security_group(self, name: str, project_id="demo", description=None) -> dict:
        group = {"id": str(uuid.uuid4()), "name": name, "tenant_id": project_id, "project_id": project_id,
                 "description": f"{name} group" if description is None else description,
                 "security_group_rules": []}
        self.security_groups[group["id"]] = group
        for ethertype in ("IPv4", "IPv6"):  # Neutron's default egress rules
            self._add_rule(group, {"direction": "egress", "ethertype": ethertype}, project_id)
        return group

    def _add_rule(self, group: dict, fields: dict, project_id: str) -> dict:
        rule = {"id": str(uuid.uuid4()), "security_group_id": group["id"], "direction": "ingress",
                "ethertype": "IPv4", "protocol": None, "port_range_min": None, "port_range_max": None,
                "remote_group_id": None, "remote_ip_prefix": None, "tenant_id": project_id,
                "project_id": project_id, **fields}
        group["security_group_rules"].append(rule)
        return rule

    def floating_ip(self, network: dict, project_id="demo", address=None, port=None) -> dict:
        fip = {"id": str(uuid.uuid4()), "tenant_id": project_id, "project_id": project_id,
               "floating_network_id": network["id"],
               "floating_ip_address": address or f"172.24.4.{self.request_count % 200 + 10 + len(self.floating_ips)}",
               "fixed_ip_address": None, "port_id": None, "port_details": None, "status": "DOWN"}
        self.floating_ips[fip["id"]] = fip
        if port is not None:
            self._associate(fip, port["id"], port["fixed_ips"][0]["ip_address"])
        return fip

    def _associate(self, fip: dict, port_id, address) -> None:
        port = self.ports.get(port_id) if port_id else None
        fip.update(port_id=port_id, fixed_ip_address=address if port else None,
                   port_details={"device_id": port["device_id"], "device_owner": port["device_owner"],
                                 "mac_address": port["mac_address"], "network_id": port["network_id"],
                                 "status": port["status"]} if port else None)

    def rules(self) -> dict[str, dict]:
        return {r["id"]: r for g in self.security_groups.values() for r in g["security_group_rules"]}

    # -- HTTP --------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        path = environ["PATH_INFO"]
        sent = self.body = self._read_body(environ)
        self.requests.append({"method": environ["REQUEST_METHOD"], "path": path, "query": query,
                              "token": environ.get("HTTP_X_AUTH_TOKEN"),
                              "service_token": environ.get("HTTP_X_SERVICE_TOKEN"), "body": sent})
        self.request_count += 1
        request_id = f"req-{self.request_count:08d}-0000-4000-8000-000000000000"
        if environ["REQUEST_METHOD"] == "GET":
            status, body = self._answer("GET", path, query)
        else:
            status, body = self._write(environ["REQUEST_METHOD"], path, sent, environ.get("HTTP_X_AUTH_TOKEN"))
        data = json.dumps(body).encode() if body is not None else b""
        start_response(f"{status} X", [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                                       ("X-Openstack-Request-Id", request_id)])
        return [data]

    def _read_body(self, environ):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        return json.loads(environ["wsgi.input"].read(length)) if length else None

    def _events(self, events):
        if self.notify is not None and events:
            self.notify(events)

    def plug(self, port_id, status="completed"):
        """What the node's L2 agent's update_device_up does: the port ACTIVE, network-vif-plugged sent."""
        port = self.ports[port_id]
        port["status"] = "ACTIVE"
        self._events([{"name": "network-vif-plugged", "server_uuid": port["device_id"], "tag": port_id,
                       "status": status}])

    def unplug(self, port_id):
        port = self.ports[port_id]
        port["status"] = "DOWN"
        self._events([{"name": "network-vif-unplugged", "server_uuid": port["device_id"], "tag": port_id,
                       "status": "completed"}])

    @staticmethod
    def project_of(token) -> str:
        """The project a test token ("user:project") acts in."""
        return (token or "demo:demo").split(":")[-1]

    def _write(self, method, path, body, token):
        """POST, PUT and DELETE of security groups and rules, ports and floating IPs, with Neutron's checks."""
        if self.fail_with:
            return self._error(self.fail_with, "Failure", "Request Failed: internal server error")
        parts = path.strip("/").split("/")[1:]
        project = self.project_of(token)
        kind = parts[0] if parts else ""
        if method == "POST" and parts == ["security-groups"]:
            mine = [g for g in self.security_groups.values() if g["tenant_id"] == project]
            if len(mine) >= self.security_group_quota:
                return self._error(409, "OverQuota", "Quota exceeded for resources: ['security_group'].")
            fields = body["security_group"]
            return 201, {"security_group": self.security_group(fields["name"], project, fields.get("description"))}
        if method == "POST" and parts == ["security-group-rules"]:
            made = []
            for fields in body["security_group_rules"]:
                group = self.security_groups.get(fields["security_group_id"])
                if group is None:
                    return self._error(404, "SecurityGroupNotFound",
                                       f"Security group {fields['security_group_id']} does not exist")
                if fields.get("remote_group_id") and fields["remote_group_id"] not in self.security_groups:
                    return self._error(404, "SecurityGroupNotFound",
                                       f"Security group {fields['remote_group_id']} does not exist")
                made.append(self._add_rule(group, {k: v for k, v in fields.items() if v is not None}, project))
            return 201, {"security_group_rules": made}
        if method == "POST" and parts == ["ports"]:
            wanted = body["port"]
            net = self.networks.get(wanted.get("network_id"))
            if net is None:
                return self._error(404, "NetworkNotFound", f"Network {wanted.get('network_id')} could not be found.")
            fixed = None
            taken = {ip["ip_address"] for p in self.ports.values() if p["network_id"] == net["id"]
                     for ip in p.get("fixed_ips") or ()}
            for ip in wanted.get("fixed_ips") or ():
                if ip["ip_address"] in taken:
                    return self._error(409, "IpAddressAlreadyAllocated",
                                       f"IP address {ip['ip_address']} already allocated in subnet {net['subnets'][0]}")
            if wanted.get("fixed_ips"):
                fixed = [{"subnet_id": net["subnets"][0], "ip_address": ip["ip_address"]} for ip in wanted["fixed_ips"]]
            extra = {k: v for k, v in wanted.items() if k not in ("network_id", "fixed_ips", "tenant_id")}
            port = self.port(net, project_id=wanted.get("tenant_id", "demo"), fixed_ips=fixed, **extra)
            return 201, {"port": port}
        if method == "POST" and parts == ["floatingips"]:
            network = self.networks.get(body["floatingip"]["floating_network_id"])
            if network is None or not network.get("router:external"):
                return self._error(404, "ExternalNetworkNotFound", "External network not found")
            if len([f for f in self.floating_ips.values() if f["tenant_id"] == project]) >= self.floating_ip_quota:
                return self._error(409, "OverQuota", "Quota exceeded for resources: ['floatingip'].")
            fip = self.floating_ip(network, project)
            return 201, {"floatingip": fip}
        if len(parts) != 2:
            return self._error(405, "HTTPMethodNotAllowed", "not allowed")
        ident = parts[1]
        if kind == "security-groups":
            group = self.security_groups.get(ident)
            if group is None:
                return self._error(404, "SecurityGroupNotFound", f"Security group {ident} does not exist")
            if method == "DELETE":
                if group["name"] == "default":
                    return self._error(409, "SecurityGroupCannotRemoveDefault",
                                       "Insufficient rights for removing default security group.")
                if any(ident in (p.get("security_groups") or []) for p in self.ports.values()):
                    return self._error(409, "SecurityGroupInUse", f"Security Group {ident} in use.")
                del self.security_groups[ident]
                return 204, None
            group.update(body["security_group"])
            return 200, {"security_group": group}
        if kind == "security-group-rules" and method == "DELETE":
            for group in self.security_groups.values():
                for rule in group["security_group_rules"]:
                    if rule["id"] == ident:
                        group["security_group_rules"].remove(rule)
                        return 204, None
            return self._error(404, "SecurityGroupRuleNotFound", f"Security group rule {ident} does not exist")
        if kind == "ports":
            port = self.ports.get(ident)
            if port is None:
                return self._error(404, "PortNotFound", f"Port {ident} could not be found.")
            if method == "DELETE":
                del self.ports[ident]
                if port.get("device_id") and port.get("device_owner", "").startswith("compute:"):
                    self._events([{"name": "network-vif-deleted", "server_uuid": port["device_id"],
                                   "tag": port["id"], "status": "completed"}])
                return 204, None
            fields = dict(body["port"])
            if "fixed_ips" in fields:
                ips = []
                for ip in fields["fixed_ips"]:
                    if "ip_address" not in ip:
                        ip = {**ip, "ip_address": f"10.0.0.{100 + len(ips) + len(self.ports)}"}
                    ips.append(ip)
                fields["fixed_ips"] = ips
            port.update(fields)
            if "binding:host_id" in fields:
                host = port.get("binding:host_id")
                if host:
                    ok = self.agent_hosts is None or host in self.agent_hosts
                    port["binding:vif_type"] = "ovs" if ok else "binding_failed"
                else:
                    port["binding:vif_type"] = "unbound"
                    port["status"] = "DOWN"
            if port.get("device_owner", "").startswith("compute:"):
                self._events([{"name": "network-changed", "server_uuid": port["device_id"], "tag": port["id"]}])
            return 200, {"port": port}
        if kind == "floatingips":
            fip = self.floating_ips.get(ident)
            if fip is None:
                return self._error(404, "FloatingIPNotFound", f"Floating IP {ident} could not be found")
            if method == "DELETE":
                del self.floating_ips[ident]
                return 204, None
            fields = body["floatingip"]
            if fields.get("port_id") and fip["port_id"] and fip["port_id"] != fields["port_id"]:
                return self._error(409, "FloatingIPPortAlreadyAssociated",
                                   f"Cannot associate floating IP {fip['floating_ip_address']} ({ident}) with port "
                                   f"{fields['port_id']}, as that floating IP is already associated")
            self._associate(fip, fields.get("port_id"), fields.get("fixed_ip_address"))
            return 200, {"floatingip": fip}
        return self._error(405, "HTTPMethodNotAllowed", "not allowed")

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
        if parts == ["subnets"]:
            return 200, {"subnets": self._filter(self.subnets.values(), query)}
        if parts[0] == "security-group-rules" and len(parts) == 2:
            rule = self.rules().get(parts[1])
            if rule is None:
                return self._error(404, "SecurityGroupRuleNotFound", f"Security group rule {parts[1]} does not exist")
            return 200, {"security_group_rule": rule}
        if parts == ["networks"]:
            return 200, {"networks": self._filter(self.networks.values(), query)}
        if parts[0] == "networks" and len(parts) == 2:
            net = self.networks.get(parts[1])
            if net is None:
                return self._error(404, "NetworkNotFound", f"Network {parts[1]} could not be found.")
            return 200, {"network": {"mtu": 1450, "provider:network_type": "vxlan",
                                     "provider:segmentation_id": 7, **net}}
        if parts == ["ports"]:
            return 200, {"ports": self._filter(self.ports.values(), query)}
        if parts[0] == "ports" and len(parts) == 2:
            port = self.ports.get(parts[1])
            if port is None:
                return self._error(404, "PortNotFound", f"Port {parts[1]} could not be found.")
            return 200, {"port": port}
        if parts[0] == "security-groups" and len(parts) == 2:
            group = self.security_groups.get(parts[1])
            if group is None:
                return self._error(404, "SecurityGroupNotFound", f"Security group {parts[1]} does not exist")
            return 200, {"security_group": group}
        if parts == ["security-groups"]:
            return 200, {"security_groups": self._filter(self.security_groups.values(), query)}
        if parts[0] == "quotas" and len(parts) == 2:
            return 200, {"quota": {"port": -1, "network": 100, **self.quotas.get(parts[1], {})}}
        if parts == ["floatingips"]:
            return 200, {"floatingips": self._filter(self.floating_ips.values(), query)}
        if parts[0] == "floatingips" and len(parts) == 2:
            fip = self.floating_ips.get(parts[1])
            if fip is None:
                return self._error(404, "FloatingIPNotFound", f"Floating IP {parts[1]} could not be found")
            return 200, {"floatingip": fip}
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
