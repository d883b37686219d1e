"""[keystone]: where the API finds the identity service to check project ids (Nova's group and defaults).

keystoneauth's session and adapter options, registered by the Keystone project verifier only
(api/identity.py): oslo.config reads late-registered options from the files already parsed, and noauth2
workers never import keystoneauth for them.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

GROUP = "keystone"
# Nova's defaults for its [keystone] adapter: the internal endpoint first, then the public one.
DEFAULT_VALID_INTERFACES = ["internal", "public"]


def _adapter_opts() -> list[cfg.Opt]:
    from keystoneauth1 import loading as ks_loading

    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(opts, valid_interfaces=DEFAULT_VALID_INTERFACES, service_type="identity")
    return opts


def register_opts(conf: cfg.ConfigOpts) -> None:
    from keystoneauth1 import loading as ks_loading

    ks_loading.register_session_conf_options(conf, GROUP)
    conf.register_opts(_adapter_opts(), group=GROUP)


def list_opts() -> list[tuple[str, list[Any]]]:
    from keystoneauth1 import loading as ks_loading

    return [(GROUP, ks_loading.get_session_conf_options() + _adapter_opts())]
