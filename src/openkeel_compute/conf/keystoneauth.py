"""keystoneauth's adapter options for a client's group ([glance], [placement]), as Nova registers them."""

from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

VERSION_OPTS = frozenset({"version", "min_version", "max_version"})


def adapter_opts(service_type: str, valid_interfaces: list[str]) -> list[cfg.Opt]:
    """The adapter options with the service's defaults, without the API version ones."""
    opts = [o for o in ks_loading.get_adapter_conf_options(include_deprecated=False) if o.dest not in VERSION_OPTS]
    cfg.set_defaults(opts, valid_interfaces=valid_interfaces, service_type=service_type)
    return opts


def _nothing(_value: str) -> None:
    return None


def register_adapter_opts(conf: cfg.ConfigOpts, group: str, service_type: str, valid_interfaces: list[str]) -> None:
    conf.register_opts(adapter_opts(service_type, valid_interfaces), group=group)
    # The API versions are the code's business, not the operator's: options nobody can set.
    for name in sorted(VERSION_OPTS):
        conf.register_opt(cfg.Opt(name, type=_nothing), group=group)  # type: ignore[arg-type]


def register_client_opts(conf: cfg.ConfigOpts, group: str, own: list[cfg.Opt], *, auth: bool = True,
                         adapter: tuple[str, list[str]] | None = None) -> None:
    """A client group's options as Nova registers them: its own, keystoneauth's session options, with
    ``auth`` its auth plugin options, with ``adapter`` (service type, valid interfaces) the adapter ones."""
    conf.register_opts(own, group=group)
    ks_loading.register_session_conf_options(conf, group)
    if auth:
        ks_loading.register_auth_conf_options(conf, group)
    if adapter is not None:
        register_adapter_opts(conf, group, *adapter)


def client_opts(own: list[cfg.Opt], *, auth: bool = True, adapter: tuple[str, list[str]] | None = None) -> list[cfg.Opt]:
    """The options ``register_client_opts`` registers, as the sample configuration lists them (the password
    plugin's for the auth plugin)."""
    opts = own + ks_loading.get_session_conf_options()
    if auth:
        opts += ks_loading.get_auth_common_conf_options() + ks_loading.get_auth_plugin_conf_options("password")
    if adapter is not None:
        opts += adapter_opts(*adapter)
    return opts
