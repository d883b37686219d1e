"""The metadata service's options: where it listens ([DEFAULT]) and how it answers ([api]), as Nova's."""

from __future__ import annotations

from oslo_config import cfg

DEFAULT_OPTS = [
    cfg.HostAddressOpt("metadata_listen", default="0.0.0.0",
                       help="The address the metadata service (openkeel-compute metadata) listens on. As Nova's "
                            "option of the same name."),
    cfg.PortOpt("metadata_listen_port", default=8775,
                help="The port the metadata service listens on. As Nova's option of the same name."),
]

API_OPTS = [
    cfg.IntOpt("metadata_cache_expiration", default=15, min=0,
               help="Seconds a server's metadata is kept by the metadata service before it is read from the "
                    "database again; 0 reads it for every request. As Nova's option of the same name."),
    cfg.BoolOpt("use_forwarded_for", default=False,
                help="Take the guest's address from X-Forwarded-For instead of the peer's (the metadata "
                     "service behind a proxy that is not Neutron's). As Nova's option of the same name."),
    cfg.StrOpt("dhcp_domain", default="novalocal",
               help="The domain the guests' hostnames in the metadata end with (empty: none). As Nova's option "
                    "of the same name."),
    cfg.ListOpt("vendordata_providers", default=["StaticJSON"],
                help="Where vendor data comes from: StaticJSON (vendordata_jsonfile_path) is the one provider "
                     "here; Nova's DynamicJSON is not served."),
    cfg.StrOpt("vendordata_jsonfile_path",
               help="A JSON file served as the guests' static vendor data (vendor_data.json and "
                    "vendor_data2.json's \"static\"). As Nova's option of the same name."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DEFAULT_OPTS)
    conf.register_opts(API_OPTS, group="api")


def list_opts() -> list[tuple]:
    return [("DEFAULT", DEFAULT_OPTS), ("api", API_OPTS)]
