"""[service_user]: the controller's service credential towards the image service (Nova's group name).

keystoneauth's session and auth options, registered by the controller's image access
(controller/images.py) when it starts: API workers never read them, and keystoneauth with requests
under it would stay resident in every one of them.
"""

from __future__ import annotations

from oslo_config import cfg

from openkeel_compute.conf import groups

SERVICE_USER = "service_user"
SERVICE_USER_GROUP = cfg.OptGroup(
    SERVICE_USER, title="Service credential",
    help="The credential the controller uses towards the image service: the token the cluster's image "
         "importer sends to Glance. Leave auth_type unset when Glance needs no token (noauth2, or the local "
         "image service). With send_service_user_token, the API also sends this credential's token as "
         "X-Service-Token beside the caller's on every Neutron call, as Nova does.")

SEND_SERVICE_USER_TOKEN = cfg.BoolOpt(
    "send_service_user_token", default=False,
    help="Send the service credential's token (X-Service-Token) with the caller's token on the calls Nova "
         "makes with one (Neutron), so that a caller's token expiring during a long operation is still "
         "accepted. As Nova's option of the same name.")


def register_opts(conf: cfg.ConfigOpts) -> None:
    if SERVICE_USER in conf and "auth_type" in conf[SERVICE_USER]:
        return
    from openkeel_compute.conf.keystoneauth import register_client_opts

    conf.register_group(groups.own(SERVICE_USER_GROUP))
    register_client_opts(conf, SERVICE_USER, [SEND_SERVICE_USER_TOKEN])


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    from openkeel_compute.conf.keystoneauth import client_opts

    return [(SERVICE_USER_GROUP, client_opts([SEND_SERVICE_USER_TOKEN]))]
