"""The metadata documents of one server, as Nova 34.0.0's metadata API serves them (nova/api/metadata/base.py).

``Record`` is what the documents are made from (read once from the database, compute/…); ``Documents``
answers a path as Nova's ``InstanceMetadata.lookup`` does: the EC2-style tree (``/2009-04-04/meta-data/…``,
versions 1.0 to 2009-04-04 and ``latest``) and the OpenStack tree (``/openstack/<version>/meta_data.json``,
``user_data``, ``password``, ``vendor_data.json``, ``network_data.json``, ``vendor_data2.json``). A path it
does not have raises ``NotFound`` (Nova's InvalidMetadataPath, a 404). Pure: no I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
import posixpath
from typing import Any

VERSIONS = ["1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01",
            "2008-09-01", "2009-04-04"]
FOLSOM, GRIZZLY, HAVANA, LIBERTY = "2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15"
NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY = "2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27"
VICTORIA, EPOXY = "2020-10-14", "2025-04-04"
OPENSTACK_VERSIONS = [FOLSOM, GRIZZLY, HAVANA, LIBERTY, NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA, EPOXY]
TEXT, JSON_TYPE = "text/plain", "application/json"
PASSWORD = object()  # the answer of openstack/<version>/password: the service reads or stores the password


class NotFound(Exception):
    """A path the server's metadata does not have (Nova answers 404)."""


@dataclasses.dataclass(frozen=True)
class Record:
    """A server as its metadata describes it."""

    uuid: str
    project_id: str
    hostname: str
    display_name: str
    launch_index: int
    availability_zone: str | None
    reservation_id: str
    ec2_id: int  # the instances row's id: Nova's EC2 ids are i-/ami- and 8 hex digits of an id
    image_ec2_id: int
    flavor_name: str
    user_data: str | None  # base64, as Nova keeps it
    metadata: dict[str, str]
    key_name: str | None
    key_data: str | None
    key_type: str = "ssh"
    security_groups: tuple[str, ...] = ()
    fixed_ips: tuple[str, ...] = ()
    floating_ips: tuple[str, ...] = ()
    network_data: dict[str, Any] = dataclasses.field(default_factory=dict)
    password: str = ""
    root_device_name: str = "/dev/vda"


@dataclasses.dataclass(frozen=True)
class Site:
    """The options the documents depend on (Nova's [api] dhcp_domain, vendordata)."""

    dhcp_domain: str = "novalocal"
    vendordata_providers: tuple[str, ...] = ("StaticJSON",)
    static_vendor_data: dict[str, Any] = dataclasses.field(default_factory=dict)


def ec2_print(data: Any) -> bytes:
    """Nova's ec2_md_print: a tree level as its sorted names (a dict as ``key/``), a list one item a line."""
    if isinstance(data, dict):
        lines = []
        for key in sorted(data):
            if key == "_name":
                continue
            value = data[key]
            if isinstance(value, dict):
                lines.append(str(value["_name"]) if "_name" in value else key + "/")
            else:
                lines.append(key)
        return "\n".join(lines).encode()
    if isinstance(data, list):
        return "\n".join(data).encode()
    if isinstance(data, bytes):
        return data
    return str(data).encode()


def _ec2_id(prefix: str, number: int) -> str:
    return f"{prefix}-{number:08x}"


class Documents:
    def __init__(self, record: Record, site: Site | None = None, address: str | None = None,
                 today: dt.date | None = None) -> None:
        self.record, self.site, self.address = record, site or Site(), address
        self.today = today or dt.datetime.now(dt.UTC).date()
        self.user_data = base64.b64decode(record.user_data) if record.user_data is not None else None

    # -- EC2 ------------------------------------------------------------------------------------------

    def hostname(self) -> str:
        domain = self.site.dhcp_domain
        return f"{self.record.hostname}.{domain}" if domain else self.record.hostname

    def ec2(self, version: str) -> dict[str, Any]:
        if version == "latest":
            version = VERSIONS[-1]
        if version not in VERSIONS:
            raise NotFound(version)
        at = VERSIONS.index(version)
        r = self.record
        host = self.hostname()
        meta: dict[str, Any] = {
            "ami-id": _ec2_id("ami", r.image_ec2_id), "ami-launch-index": r.launch_index,
            "ami-manifest-path": "FIXME", "instance-id": _ec2_id("i", r.ec2_id), "hostname": host,
            "local-ipv4": (r.fixed_ips[0] if r.fixed_ips else "") or self.address,
            "reservation-id": r.reservation_id, "security-groups": list(r.security_groups)}
        if r.key_name:
            meta["public-keys"] = {"0": {"_name": "0=" + r.key_name, "openssh-key": r.key_data}}
        if at >= VERSIONS.index("2007-01-19"):
            meta.update({"local-hostname": host, "public-hostname": host,
                         "public-ipv4": r.floating_ips[0] if r.floating_ips else ""})
        if at >= VERSIONS.index("2007-08-29"):
            meta["instance-type"] = r.flavor_name
        if at >= VERSIONS.index("2007-12-15"):
            meta["block-device-mapping"] = {"ami": "vda", "root": r.root_device_name}
        if at >= VERSIONS.index("2008-02-01"):
            meta["placement"] = {"availability-zone": r.availability_zone}
        if at >= VERSIONS.index("2008-09-01"):
            meta["instance-action"] = "none"
        data: dict[str, Any] = {"meta-data": meta}
        if self.user_data is not None:
            data["user-data"] = self.user_data
        return data

    # -- OpenStack ------------------------------------------------------------------------------------

    def _since(self, required: str, version: str) -> bool:
        return OPENSTACK_VERSIONS.index(version) >= OPENSTACK_VERSIONS.index(required)

    def meta_data(self, version: str) -> dict[str, Any]:
        r = self.record
        data: dict[str, Any] = {"uuid": r.uuid}
        if r.metadata:
            data["meta"] = dict(r.metadata)
        if r.key_name and r.key_data:
            data["public_keys"] = {r.key_name: r.key_data}
            data["keys"] = [{"name": r.key_name, "type": r.key_type, "data": r.key_data}]
        data.update(hostname=self.hostname(), name=r.display_name, launch_index=r.launch_index,
                    availability_zone=r.availability_zone)
        if self._since(GRIZZLY, version):
            data["random_seed"] = base64.b64encode(os.urandom(512)).decode()
        if self._since(LIBERTY, version):
            data["project_id"] = r.project_id
        if self._since(NEWTON_ONE, version):
            data["devices"] = []
        if self._since(VICTORIA, version):
            data["dedicated_cpus"] = []
        return data

    def listing(self, version: str) -> list[str]:
        found = ["meta_data.json"]
        if self.user_data is not None:
            found.append("user_data")
        if self._since(GRIZZLY, version):
            found.append("password")
        if self._since(HAVANA, version):
            found.append("vendor_data.json")
        if self._since(LIBERTY, version):
            found.append("network_data.json")
        if self._since(NEWTON_TWO, version):
            found.append("vendor_data2.json")
        return found

    def openstack(self, tokens: list[str]) -> tuple[Any, str]:
        version = OPENSTACK_VERSIONS[-1] if tokens[0] == "latest" else tokens[0]
        if version not in OPENSTACK_VERSIONS:
            raise NotFound(version)
        name = "/".join(tokens[1:])
        if not name:
            return self.listing(version), TEXT
        if name == "meta_data.json":
            return _json(self.meta_data(version)), JSON_TYPE
        if name == "user_data" and self.user_data is not None:
            return self.user_data, TEXT
        if name == "password" and self._since(GRIZZLY, version):
            return PASSWORD, TEXT
        if name == "network_data.json":  # every version has it in Nova's route table
            return _json(self.record.network_data), TEXT
        if name == "vendor_data.json" and self._since(HAVANA, version):
            static = self.site.static_vendor_data if "StaticJSON" in self.site.vendordata_providers else {}
            return _json(static), JSON_TYPE
        if name == "vendor_data2.json" and self._since(NEWTON_TWO, version):
            both = {"static": self.site.static_vendor_data} if "StaticJSON" in self.site.vendordata_providers else {}
            return _json(both), JSON_TYPE
        raise NotFound(name)

    # -- a path ---------------------------------------------------------------------------------------

    def lookup(self, path: str) -> tuple[Any, str]:
        """(the answer: a tree level, bytes, or PASSWORD; its content type) of ``path``."""
        path = posixpath.normpath("/" + path.lstrip("/")) if path else "/"
        tokens = path.split("/")[1:]
        if tokens[0] not in ("ec2", "openstack"):
            tokens = ["ec2"] if tokens[0] == "" else ["ec2", *tokens]
        if len(tokens) == 1:
            if tokens[0] == "openstack":
                return [v for v in OPENSTACK_VERSIONS if v <= self.today.isoformat()] + ["latest"], TEXT
            return VERSIONS + ["latest"], TEXT
        if tokens[0] == "openstack":
            return self.openstack(tokens[1:])
        data: Any = self.ec2(tokens[1])
        for token in tokens[2:]:
            if not isinstance(data, dict) or token not in data:
                raise NotFound(path)
            data = data[token]
        return data, TEXT


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def network_data(addresses: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """network_data.json from the server's addresses (Nova's shape: links, networks, services): one link per
    MAC, one network per address, configured by DHCP (KubeVirt's pod network and Neutron's ports both
    answer DHCP)."""
    links: dict[str, dict[str, Any]] = {}
    networks: list[dict[str, Any]] = []
    for name, entries in sorted(addresses.items()):
        for entry in entries:
            if entry.get("OS-EXT-IPS:type") == "floating":
                continue
            mac = entry.get("OS-EXT-IPS-MAC:mac_addr") or ""
            link = links.setdefault(mac, {"id": f"tap{len(links)}", "vif_id": None, "type": "phy", "mtu": None,
                                          "ethernet_mac_address": mac})
            version = int(entry.get("version") or 4)
            networks.append({"id": f"network{len(networks)}", "type": f"ipv{version}_dhcp", "link": link["id"],
                             "network_id": name})
    return {"links": list(links.values()), "networks": networks, "services": []}
