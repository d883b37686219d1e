"""[neutron] and the VIF plugging options of [DEFAULT], with Nova 34.0.0's names and defaults.

``[neutron]`` holds keystoneauth's auth plugin options (``auth_type``, ``auth_url``, ``username``,
``password``, ``project_name``, ``user_domain_name``, ``project_domain_name``, ...), its session
options (``cafile``, ``insecure``, ``timeout``, ...) and its adapter options (``service_type``
network, ``valid_interfaces`` internal then public, ``region_name``, ``endpoint_override``), plus
Nova's own ``[neutron]`` options that OpenKeel reads. With ``[neutron] auth_type`` unset, servers
sit on the cluster's pod network and Neutron is never called; with it set, Neutron is the only
network service.
"""

from __future__ import annotations

from oslo_config import cfg

from openkeel_compute.conf import groups

GROUP = "neutron"
SERVICE_TYPE = "network"
DEFAULT_VALID_INTERFACES = ["internal", "public"]

NEUTRON_GROUP = cfg.OptGroup(
    GROUP, title="Neutron",
    help="Where Neutron is and the credential OpenKeel uses for the calls Nova makes as an administrator "
         "(binding ports to the node a server runs on). Leave auth_type unset to keep servers on the "
         "cluster's pod network.")

NEUTRON_OPTS = [
    cfg.StrOpt("default_floating_pool", default="nova",
               help="The external network a floating IP is allocated from when the request names no pool "
                    "(os-floating-ips up to microversion 2.35). As Nova's option of the same name."),
    cfg.IntOpt("http_retries", default=3, min=0,
               help="How many times a Neutron call that could not connect is retried. As Nova's option of "
                    "the same name."),
    cfg.BoolOpt("service_metadata_proxy", default=False,
                help="Whether Neutron's metadata proxy forwards the guests' metadata requests. As Nova's "
                     "option of the same name."),
    cfg.StrOpt("metadata_proxy_shared_secret", default="", secret=True,
               help="The secret Neutron's metadata proxy signs forwarded requests with. As Nova's option of "
                    "the same name."),
]

VIF_OPTS = [
    cfg.BoolOpt("vif_plugging_is_fatal", default=True,
                help="Whether a server whose ports Neutron did not report plugged (network-vif-plugged) "
                     "within vif_plugging_timeout fails to build (ERROR) instead of going on. As Nova's "
                     "option of the same name."),
    cfg.IntOpt("vif_plugging_timeout", default=300, min=0,
               help="Seconds a build waits for Neutron's network-vif-plugged event of every port; 0 does "
                    "not wait. As Nova's option of the same name."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """At start: the [DEFAULT] VIF options only. ``[neutron]`` is registered by the code that reads it
    (``register_neutron_opts``), with the values of the files parsed at start: keystoneauth's options
    need keystoneauth, which an API worker that never meets Neutron does not import."""
    conf.register_opts(VIF_OPTS)


def register_neutron_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(VIF_OPTS)
    if GROUP in conf and "service_type" in conf[GROUP]:
        return  # already registered (one per process, but tests build several)
    # keystoneauth at the first use of [neutron]: workers start without it
    from openkeel_compute.conf.keystoneauth import register_client_opts

    conf.register_group(groups.own(NEUTRON_GROUP))
    register_client_opts(conf, GROUP, NEUTRON_OPTS, adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES))


def _sections(conf: cfg.ConfigOpts) -> set[str]:
    return set(conf.list_all_sections())  # the sections of the files parsed (none before they are)


def list_opts() -> list[tuple]:
    from openkeel_compute.conf.keystoneauth import client_opts

    return [("DEFAULT", VIF_OPTS),
            (NEUTRON_GROUP, client_opts(NEUTRON_OPTS, adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES)))]


def configured(conf: cfg.ConfigOpts) -> bool:
    """True when ``[neutron]`` names a credential (``auth_type``): Neutron is the network service. Without
    a ``[neutron]`` section (and its options not registered yet) that is known without importing keystoneauth,
    so that a worker's reads (a server body asks this) start no client of other services."""
    if not (GROUP in conf and "service_type" in conf[GROUP]) and GROUP not in _sections(conf):
        conf.register_opts(VIF_OPTS)
        return False
    register_neutron_opts(conf)
    try:
        return bool(conf.neutron.auth_type)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
        return False
