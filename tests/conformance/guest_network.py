"""The Neutron network on which the conformance tier's guests can be logged in to over SSH.

The built-in cluster has no dataplane: a guest answers SSH only on an address this machine has
(src/openkeel_compute/emulator/sshd.py). Every address of the loopback network 127.0.0.0/8 is this machine's,
so a shared network whose subnet lies there (without DHCP: Neutron refuses DHCP on a loopback subnet, and the
guest takes its static address from the network data) puts each server's port on an address Tempest's
RemoteClient reaches. Made as the cloud admin, once (found again by name); prints its name.

    python guest_network.py --keystone-url URL --password-file FILE [--name guests] [--cidr 127.100.0.0/24]

Run with the tempest venv's Python (keystoneauth1).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keystone-url", required=True)
    parser.add_argument("--password-file", required=True)
    parser.add_argument("--region", default="RegionOne")
    parser.add_argument("--name", default="guests")
    parser.add_argument("--cidr", default="127.100.0.0/24")
    args = parser.parse_args(argv)
    auth = v3.Password(auth_url=args.keystone_url, username="admin",
                       password=pathlib.Path(args.password_file).read_text().strip(), project_name="admin",
                       user_domain_id="default", project_domain_id="default")
    sess = ks_session.Session(auth=auth)
    url = sess.get_endpoint(service_type="network", interface="public", region_name=args.region).rstrip("/")
    if not url.endswith("/v2.0"):
        url += "/v2.0"
    nets = sess.get(f"{url}/networks", params={"name": args.name}).json()["networks"]
    net = nets[0] if nets else sess.post(f"{url}/networks", json={"network": {
        "name": args.name, "shared": True, "admin_state_up": True}}).json()["network"]
    subnets = sess.get(f"{url}/subnets", params={"network_id": net["id"]}).json()["subnets"]
    if not subnets:
        sess.post(f"{url}/subnets", json={"subnet": {
            "network_id": net["id"], "name": f"{args.name}-subnet", "ip_version": 4, "cidr": args.cidr,
            "enable_dhcp": False, "gateway_ip": None}})
    print(net["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
