"""kubevirt/netdata.py: a server's ports as Nova's network_data.json (the shape of Nova 34.0.0's
get_network_metadata: links, networks, services) and as cloud-init's network config v2 for NoCloud."""

from __future__ import annotations

from openkeel_compute.kubevirt.netdata import network_config, network_data

PORT_A = {"port_id": "0b0e6f8c-5d5e-4d6c-9a43-2f6c8b1f0a11", "network_id": "net-a", "mac": "fa:16:3e:00:00:0a",
          "mtu": 1450, "vif_type": "ovs",
          "subnets": [{"ip_address": "10.0.0.5", "cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1",
                       "dns_nameservers": ["10.0.0.2"],
                       "host_routes": [{"destination": "192.168.0.0/16", "nexthop": "10.0.0.254"}]},
                      {"ip_address": "fd00::5", "cidr": "fd00::/64", "gateway_ip": None, "dns_nameservers": [],
                       "host_routes": []}]}
PORT_B = {"port_id": "7c2d1e3f-aaaa-bbbb-cccc-000000000000", "network_id": "net-b", "mac": "fa:16:3e:00:00:0b",
          "mtu": None, "vif_type": "unbound",
          "subnets": [{"ip_address": "10.1.0.7", "cidr": "10.1.0.0/24", "gateway_ip": "10.1.0.1",
                       "dns_nameservers": ["10.0.0.2", "1.1.1.1"], "host_routes": []}]}


def test_network_data_json_has_novas_shape():
    assert network_data([PORT_A, PORT_B]) == {
        "links": [
            {"id": "tap0b0e6f8c-5d", "vif_id": PORT_A["port_id"], "type": "ovs", "mtu": 1450,
             "ethernet_mac_address": "fa:16:3e:00:00:0a"},
            {"id": "tap7c2d1e3f-aa", "vif_id": PORT_B["port_id"], "type": "phy", "mtu": None,
             "ethernet_mac_address": "fa:16:3e:00:00:0b"}],
        "networks": [
            {"id": "network0", "type": "ipv4", "link": "tap0b0e6f8c-5d", "ip_address": "10.0.0.5",
             "netmask": "255.255.255.0", "network_id": "net-a",
             "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"},
                        {"network": "192.168.0.0", "netmask": "255.255.0.0", "gateway": "10.0.0.254"}],
             "services": [{"type": "dns", "address": "10.0.0.2"}]},
            {"id": "network1", "type": "ipv6", "link": "tap0b0e6f8c-5d", "ip_address": "fd00::5",
             "netmask": "ffff:ffff:ffff:ffff::", "network_id": "net-a", "routes": [], "services": []},
            {"id": "network2", "type": "ipv4", "link": "tap7c2d1e3f-aa", "ip_address": "10.1.0.7",
             "netmask": "255.255.255.0", "network_id": "net-b",
             "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.1.0.1"}],
             "services": [{"type": "dns", "address": "10.0.0.2"}, {"type": "dns", "address": "1.1.1.1"}]}],
        "services": [{"type": "dns", "address": "10.0.0.2"}, {"type": "dns", "address": "1.1.1.1"}]}


def test_ports_without_subnets_give_no_data():
    assert network_data([{**PORT_A, "subnets": []}]) is None
    assert network_data([{k: v for k, v in PORT_A.items() if k != "subnets"}]) is None


def test_network_config_v2_matches_each_link_by_mac():
    assert network_config(network_data([PORT_A, PORT_B])) == {"version": 2, "ethernets": {
        "tap0b0e6f8c-5d": {"match": {"macaddress": "fa:16:3e:00:00:0a"}, "mtu": 1450,
                           "addresses": ["10.0.0.5/24", "fd00::5/64"],
                           "routes": [{"to": "default", "via": "10.0.0.1"}, {"to": "192.168.0.0/16", "via": "10.0.0.254"}],
                           "nameservers": {"addresses": ["10.0.0.2"]}},
        "tap7c2d1e3f-aa": {"match": {"macaddress": "fa:16:3e:00:00:0b"}, "addresses": ["10.1.0.7/24"],
                           "routes": [{"to": "default", "via": "10.1.0.1"}],
                           "nameservers": {"addresses": ["10.0.0.2", "1.1.1.1"]}}}}


def _cloud_init(server):
    import base64
    import json

    from openkeel_compute.kubevirt.server import compose
    from tests.kubevirt.objects import IMAGE, flavor_copy

    made = compose(server, flavor_copy(), IMAGE, None, ports=[PORT_A, PORT_B])
    volume = next(v for v in made.vm["spec"]["template"]["spec"]["volumes"] if v["name"] == "cloudinitdisk")
    secret = made.secrets[0]
    raw = secret.get("data", {}).get("networkdata")
    text = base64.b64decode(raw) if raw is not None else secret.get("stringData", {}).get("networkdata")
    return volume, secret["metadata"]["name"], json.loads(text)


def test_the_vm_gets_the_ports_network_data_in_its_cloud_init_secret():
    from tests.kubevirt.objects import SERVER

    volume, name, data = _cloud_init(SERVER)
    assert volume["cloudInitNoCloud"]["networkDataSecretRef"] == {"name": name}
    assert volume["cloudInitNoCloud"]["secretRef"] == {"name": name}
    assert data == network_config(network_data([PORT_A, PORT_B]))  # NoCloud: cloud-init's own format
    volume, name, data = _cloud_init(dict(SERVER, config_drive="True"))
    assert volume["cloudInitConfigDrive"]["networkDataSecretRef"] == {"name": name}
    assert data == network_data([PORT_A, PORT_B])  # a config drive: Nova's network_data.json
