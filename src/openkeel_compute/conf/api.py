"""[api] and [oslo_middleware] options."""

from oslo_config import cfg

from openkeel_compute.conf import groups

api_group = cfg.OptGroup("api", title="API options")

API_OPTS = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            ("keystone", "Authenticate with keystonemiddleware's auth_token ([keystone_authtoken])."),
            (
                "noauth2",
                "Development only: 'X-Auth-Token: user:project' is trusted as is; user 'admin' is admin.",
            ),
        ],
        help="How requests are authenticated. scripts/serve uses noauth2 on its embedded defaults.",
    ),
    cfg.IntOpt(
        "max_limit",
        default=1000,
        min=0,
        help="The largest number of items a collection returns in one response.",
    ),
    cfg.StrOpt(
        "compute_link_prefix",
        help="Replace the scheme, host and port of the links the API returns (behind a proxy).",
    ),
    cfg.StrOpt(
        "glance_link_prefix",
        help="Replace the scheme, host and port of the image service links the image proxy (/images) "
        "returns, and put this prefix's path in front of theirs (behind a proxy).",
    ),
    cfg.FloatOpt(
        "console_output_timeout",
        default=60.0,
        min=1.0,
        help="Seconds a console output request (os-getConsoleOutput) waits for the controller to read the "
        "server's console log from the cluster; after that it fails with 500 as Nova's does when its "
        "compute service does not answer in rpc_response_timeout (also 60 seconds by default).",
    ),
    cfg.BoolOpt(
        "enable_instance_password",
        default=True,
        help="Nova's option: whether the answer of a rescue carries the rescue password (adminPass). "
        "False: a rescue answers {}.",
    ),
]



def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(groups.own(api_group))
    conf.register_opts(API_OPTS, group=api_group)
    # oslo.middleware owns [oslo_middleware] (max_request_body_size = 114688, as Nova has it)
    # and [healthcheck]; registering its own option objects keeps one definition of each.
    for group, opts in _middleware_opts():
        conf.register_opts(opts, group=group)


def _middleware_opts():
    from oslo_middleware import opts as middleware_opts

    return middleware_opts.list_opts_sizelimit() + middleware_opts.list_opts_http_proxy_to_wsgi() + (
        middleware_opts.list_opts_healthcheck()
    )


def list_opts():
    return [(api_group.name, API_OPTS)] + [(group, list(opts)) for group, opts in _middleware_opts()]
