"""[cinder] and the block device options of [DEFAULT], with Nova 34.0.0's names and defaults.

``[cinder]`` holds Nova's own options (``catalog_info``, ``endpoint_template``, ``os_region_name``,
``http_retries``, ``cross_az_attach``, ``debug``) and keystoneauth's session and auth plugin options
(``auth_type``, ``auth_url``, ``username``, ``password``, ...): the credential OpenKeel uses for the
calls Nova makes as an administrator (those of the controller: attachments, volumes it creates and
deletes). Calls made for a caller use the caller's token, with ``[service_user]``'s as
X-Service-Token when ``send_service_user_token`` is true.

Cinder is the block storage service when ``[cinder] auth_type`` or ``[cinder] endpoint_template`` is
set; otherwise servers boot from an image on their local disk only and volumes are refused.

keystoneauth's options are registered at the first use of ``[cinder]`` (``register_cinder_opts``):
an API worker that never meets Cinder does not import keystoneauth for it.
"""

from __future__ import annotations

from oslo_config import cfg

from openkeel_compute.conf import groups

GROUP = "cinder"

CINDER_GROUP = cfg.OptGroup(
    GROUP, title="Cinder",
    help="Where Cinder is and the credential OpenKeel uses for the calls Nova makes as an administrator "
         "(attachments, the volumes a boot creates and deletes). Leave auth_type and endpoint_template "
         "unset when there is no block storage service: servers then boot from images only.")

CINDER_OPTS = [
    cfg.StrOpt("catalog_info", default="volumev3::publicURL", regex=r"^[\w-]+:\w*:.*$",
               help="Where Cinder is in the service catalog, as <service_type>:<service_name>:<endpoint_type> "
                    "(the service name may be empty). endpoint_template, when set, wins. As Nova's option of "
                    "the same name."),
    cfg.StrOpt("endpoint_template",
               help="Cinder's URL, overriding the catalog, e.g. http://cinder:8776/v3/%(project_id)s. As Nova's "
                    "option of the same name."),
    cfg.StrOpt("os_region_name",
               help="The region whose Cinder endpoint is taken from the catalog. As Nova's option of the same "
                    "name."),
    cfg.IntOpt("http_retries", default=3, min=0,
               help="How many times a Cinder call that could not connect is retried (0: tried once). As "
                    "Nova's option of the same name."),
    cfg.BoolOpt("cross_az_attach", default=True,
                help="Whether a server may use volumes of another availability zone. When false, the volumes "
                     "of a boot must all be in one zone, the server's; a boot without a zone is placed in the "
                     "volumes' zone. As Nova's option of the same name."),
    cfg.BoolOpt("debug", default=False,
                help="Log every Cinder request and answer at DEBUG level. As Nova's option of the same name."),
]

BLOCK_DEVICE_OPTS = [
    cfg.IntOpt("max_local_block_devices", default=3,
               help="How many block devices with destination_type local (the image's root disk, ephemeral "
                    "and swap disks) a server may have; a negative value means no limit, 0 forbids booting "
                    "from an image (boot from volume only). As Nova's option of the same name."),
    cfg.IntOpt("block_device_allocate_retries", default=60, min=0,
               help="How many times the build reads a volume it made (source image, snapshot or blank) "
                    "before it gives up waiting for it to become available (0: read once). As Nova's option "
                    "of the same name."),
    cfg.IntOpt("block_device_allocate_retries_interval", default=3, min=0,
               help="Seconds between two reads of a volume the build made. As Nova's option of the same "
                    "name."),
    cfg.IntOpt("reimage_timeout_per_gb", default=20, min=1,
               help="Seconds per GiB of the image that the rebuild of a volume-backed server (2.93) waits for "
                    "Cinder's volume-reimaged event before it fails (an image of 6 GiB: 120 seconds). As Nova's "
                    "option of the same name."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """At start: the [DEFAULT] block device options only; ``[cinder]`` at its first use."""
    conf.register_opts(BLOCK_DEVICE_OPTS)


def register_cinder_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(BLOCK_DEVICE_OPTS)
    if GROUP in conf and "catalog_info" in conf[GROUP]:
        return  # already registered (one per process, but tests build several)
    # keystoneauth at the first use of [cinder]: workers start without it
    from openkeel_compute.conf.keystoneauth import register_client_opts

    conf.register_group(groups.own(CINDER_GROUP))
    register_client_opts(conf, GROUP, CINDER_OPTS)


def list_opts() -> list[tuple]:
    from openkeel_compute.conf.keystoneauth import client_opts

    return [("DEFAULT", BLOCK_DEVICE_OPTS), (CINDER_GROUP, client_opts(CINDER_OPTS))]


def configured(conf: cfg.ConfigOpts) -> bool:
    """True when ``[cinder]`` names a credential or an endpoint: Cinder is the block storage service."""
    register_cinder_opts(conf)
    try:
        return bool(conf.cinder.auth_type or conf.cinder.endpoint_template)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
        return False
