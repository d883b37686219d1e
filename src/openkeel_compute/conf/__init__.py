"""Configuration through oslo.config, with Nova's option names where the meaning is the same.

``CONF`` is the process-wide ConfigOpts; ``build_conf()`` returns a fresh one for tests and
embedded servers. ``list_opts()`` is the ``oslo.config.opts`` entry point used by
oslo-config-generator (``--namespace openkeel-compute``).
"""

from __future__ import annotations

import importlib
import os

from oslo_config import cfg

from openkeel_compute.conf import api, database, wsgi

# Rooms that own option groups of their own; wired here so the sample and --config-file see them.
_OPTIONAL_MODULES = (
    "openkeel_compute.conf.kubevirt",
    "openkeel_compute.conf.notifications",
    "openkeel_compute.conf.controller",
    "openkeel_compute.conf.neutron",
    "openkeel_compute.conf.cinder",
    "openkeel_compute.conf.quota",
    "openkeel_compute.conf.scheduling",
    "openkeel_compute.conf.usage",
    "openkeel_compute.conf.consoles",
    "openkeel_compute.conf.metadata",
)

DEFAULT_OPTS = [
    cfg.BoolOpt("debug", default=False, help="Log at DEBUG level instead of INFO."),
    cfg.StrOpt(
        "state_path",
        default=os.path.abspath("var"),
        sample_default="$pwd/var",
        help="Where the embedded defaults keep their files (the SQLite database, rendered objects).",
    ),
    cfg.HostAddressOpt(
        "host",
        default="openkeel",
        sample_default="<current hostname>",
        help="Name of this node, used in notifications' publisher id.",
    ),
    cfg.IntOpt(
        "reclaim_instance_interval",
        default=0,
        help="Seconds a deleted server is kept, stopped and restorable (status SOFT_DELETED), before the "
        "controller deletes it for good; 0 deletes servers at once. As Nova's option of the same name.",
    ),
    cfg.IntOpt(
        "shelved_offload_time",
        default=0,
        min=-1,
        help="Seconds a shelved server keeps its VM (stopped) before it is offloaded: 0 offloads at once, "
        "-1 never. As Nova's option of the same name.",
    ),
    cfg.IntOpt(
        "resize_confirm_window",
        default=0,
        min=0,
        help="Seconds a resized server waits in VERIFY_RESIZE before the controller confirms the resize "
        "itself; 0 waits for the user. As Nova's option of the same name.",
    ),
    cfg.BoolOpt(
        "allow_resize_to_same_host",
        default=False,
        help="Let a resize stay on the server's current host. By default a resize goes to another host; "
        "set this to true when there is a single host (development and test clouds) or when affinity "
        "keeps servers together and still has to be resized. Here a host is a Kubernetes node: when "
        "false, the resize claims the new flavor on another node's resource provider and the virtual "
        "machine is restarted pinned to that node; when true, the current node may be chosen. As Nova's "
        "option of the same name.",
    ),
    cfg.ListOpt(
        "non_inheritable_image_properties",
        default=["cache_in_nova", "bittorrent"],
        help="Image properties a snapshot or backup of a server does not inherit from the server's image "
        "(besides those never inherited: the image signature and Cinder encryption properties, and the "
        "os_glance namespace). As Nova's option of the same name.",
    ),
]


def _optional_modules():
    modules = []
    for name in _OPTIONAL_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return [m for m in modules if hasattr(m, "list_opts") and hasattr(m, "register_opts")]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DEFAULT_OPTS)
    for module in (api, database, wsgi):
        module.register_opts(conf)
    from openkeel_compute.policies import register_opts as register_policy_opts

    register_policy_opts(conf)
    # [keystone] (keystoneauth's session and adapter options) is registered by the project
    # verifier, which only the keystone auth strategy builds: oslo.config reads late-registered
    # options from the files already parsed, and noauth2 workers skip keystoneauth's import.
    for module in _optional_modules():
        module.register_opts(conf)


def build_conf(args: list[str] | None = None, default_config_files: list[str] | None = None) -> cfg.ConfigOpts:
    """A fresh ConfigOpts with every OpenKeel option registered and parsed from ``args``."""
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf(args or [], project="openkeel-compute", default_config_files=default_config_files or [])
    return conf


def list_opts():
    """Every option group, for oslo-config-generator (keystonemiddleware's are in its own namespace)."""
    opts = [("DEFAULT", DEFAULT_OPTS)]
    for module in (api, database, wsgi):
        opts.extend(module.list_opts())
    from openkeel_compute.conf import keystone
    from openkeel_compute.policies import list_opts as list_policy_opts

    opts.extend(list_policy_opts())
    opts.extend(keystone.list_opts())
    from openkeel_compute.images import glance

    opts.extend(glance.list_opts())
    from openkeel_compute.placement import client as placement

    opts.extend(placement.list_opts())
    for module in _optional_modules():
        opts.extend(module.list_opts())
    return opts
