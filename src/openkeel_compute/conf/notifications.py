"""Configuration options for versioned notifications.

Two groups are involved:

``[notifications]``
    Nova's options whose meaning carries over unchanged: ``notification_format``,
    ``versioned_notifications_topics``, ``notify_on_state_change`` and ``default_level``; and
    OpenKeel's own ``send_queue_size``, ``send_max_wait`` and ``send_flush_seconds`` of the background
    sender. Nova's ``bdms_in_notifications`` and ``include_share_mapping`` are not offered: OpenKeel's
    server notifications carry ``block_devices`` and ``shares`` as Nova does with their defaults.

``[oslo_messaging_notifications]``
    oslo.messaging's own group (``driver``, ``transport_url``, ``topics``, ``retry``),
    re-declared here with OpenKeel's defaults: ``driver = noop`` so nothing is sent
    unless an operator asks for it, and ``retry = 1`` so one attempt of the background
    sender ends after a few seconds when the broker is away (oslo.messaging's own default
    of -1 retries forever, which would hold the queue in one attempt).

``[DEFAULT] control_exchange``
    Defaults to ``nova`` (oslo.messaging says ``openstack``), because Nova publishes its
    notifications on the ``nova`` exchange and that is where consumers such as
    Ceilometer bind their queues.
"""

from __future__ import annotations

import copy

from oslo_config import cfg

NOTIFICATIONS_GROUP = "notifications"
OSLO_NOTIFICATIONS_GROUP = "oslo_messaging_notifications"

DEFAULT_DRIVER = ["noop"]
DEFAULT_RETRY = 1
DEFAULT_CONTROL_EXCHANGE = "nova"

notifications_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "notification_format",
        default="unversioned",
        choices=[
            ("both", "Both the legacy unversioned and the versioned notifications are emitted"),
            ("versioned", "Only the versioned notifications are emitted"),
            ("unversioned", "Only the legacy unversioned notifications are emitted"),
        ],
        deprecated_group="DEFAULT",
        help=(
            "Which notification format to emit, with Nova's meaning. Server notifications go out in "
            "the legacy format (compute.instance.*, on the [oslo_messaging_notifications] topics) "
            "with 'unversioned' or 'both' and in the versioned format (instance.*, on "
            "versioned_notifications_topics) with 'versioned' or 'both'. Flavor and key pair "
            "notifications are sent in the versioned format only (flavors have no other; "
            "Nova's legacy key pair notifications are not emitted). Notifications can also be "
            "switched off entirely with driver=noop in [oslo_messaging_notifications], the default."
        ),
    ),
    cfg.ListOpt(
        "versioned_notifications_topics",
        default=["versioned_notifications"],
        help=(
            "Topics the versioned notifications are published on; each topic receives "
            "its own copy (routing key '<topic>.info' for flavor and key pair notifications)."
        ),
    ),
    cfg.StrOpt(
        "notify_on_state_change",
        choices=[
            (None, "no instance update notifications"),
            ("vm_state", "instance update notifications on changes of the server's state"),
            ("vm_and_task_state", "instance update notifications on changes of its state or task"),
        ],
        deprecated_group="DEFAULT",
        help=(
            "As in Nova: when a server's state (vm_state) or also its task (task_state) changes, "
            "send compute.instance.update / instance.update. Unset (Nova's default): none are sent."
        ),
    ),
    cfg.StrOpt(
        "default_level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL"),
        deprecated_group="DEFAULT",
        deprecated_name="default_notification_level",
        help="As in Nova: the priority of the legacy (unversioned) server notifications.",
    ),
    cfg.IntOpt(
        "send_queue_size",
        default=10000,
        min=1,
        help=(
            "OpenKeel: notifications are published by a background thread of each API process, "
            "never by the request that caused them. At most this many wait for the broker; one "
            "emitted while the queue is full is dropped and counted (/healthcheck details)."
        ),
    ),
    cfg.FloatOpt(
        "send_max_wait",
        default=300.0,
        min=0,
        help=(
            "OpenKeel: seconds a notification may wait for an unreachable broker; after that it "
            "is dropped and counted. Notifications that waited less go out in order once the "
            "broker answers again."
        ),
    ),
    cfg.BoolOpt(
        "bdms_in_notifications",
        default=False,
        help=(
            "Whether every versioned server notification lists the server's volumes (block_devices). "
            "The events Nova's compute sends with the server's volumes (create, delete, shutdown, "
            "reboot, rebuild, resize, resize_finish, resize_revert, resume) list them always; the "
            "others then send null. As Nova's option of the same name."
        ),
    ),
    cfg.FloatOpt(
        "send_flush_seconds",
        default=10.0,
        min=0,
        help=(
            "OpenKeel: on a clean shutdown, seconds an API process spends sending the "
            "notifications still queued; those it could not send are dropped and counted in its "
            "last log line."
        ),
    ),
]


def _oslo_messaging_opts(group: str | None) -> list[cfg.Opt]:
    """Return copies of oslo.messaging's own options of ``group`` (None: [DEFAULT])."""
    # Imported here: oslo.messaging pulls in oslo.service and eventlet (seconds of start-up and
    # tens of MiB per worker), which an API that sends no notifications never needs.
    from oslo_messaging import opts as messaging_opts

    for listed_group, opts in messaging_opts.list_opts():
        if listed_group == group:
            return list(opts)
    raise LookupError(f"oslo.messaging no longer lists a [{group or 'DEFAULT'}] group")


def _oslo_notification_opts() -> list[cfg.Opt]:
    return _oslo_messaging_opts(OSLO_NOTIFICATIONS_GROUP)


def _control_exchange_opt() -> cfg.Opt:
    return next(opt for opt in _oslo_messaging_opts(None) if opt.name == "control_exchange")


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [notifications] on ``conf``; oslo.messaging's groups come later, when needed.

    With the default ``notification_format = unversioned`` no flavor or key pair notification is ever
    sent, so oslo.messaging is not even imported; otherwise ``FlavorNotifier`` registers its
    groups (``register_messaging_opts``). oslo.config reads values of options registered after
    the files were parsed, so nothing set in a file is lost.
    """
    conf.register_opts(notifications_opts, group=NOTIFICATIONS_GROUP)


def register_messaging_opts(conf: cfg.ConfigOpts) -> None:
    """Register oslo.messaging's options with OpenKeel's defaults, on this ``conf`` only.

    The oslo.messaging options are registered unchanged (oslo.messaging registers the
    very same options again when a notifier is built, and oslo.config only accepts that
    when they are equal), then their defaults are overridden per ConfigOpts instance so
    no process-wide state changes.
    """
    conf.register_opts(_oslo_notification_opts(), group=OSLO_NOTIFICATIONS_GROUP)
    conf.set_default("driver", DEFAULT_DRIVER, group=OSLO_NOTIFICATIONS_GROUP)
    conf.set_default("retry", DEFAULT_RETRY, group=OSLO_NOTIFICATIONS_GROUP)
    conf.register_opt(_control_exchange_opt())
    conf.set_default("control_exchange", DEFAULT_CONTROL_EXCHANGE)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """List the options for oslo-config-generator, with OpenKeel's defaults shown.

    The oslo.messaging entries are copies, so changing their defaults here does not
    leak into oslo.messaging. A generator configuration that also loads the
    ``oslo.messaging`` namespace prints these options a second time with the library's
    defaults.
    """
    oslo_opts = copy.deepcopy(_oslo_notification_opts())
    for opt in oslo_opts:
        if opt.name == "driver":
            opt.default = list(DEFAULT_DRIVER)
        elif opt.name == "retry":
            opt.default = DEFAULT_RETRY
    control_exchange = copy.deepcopy(_control_exchange_opt())
    control_exchange.default = DEFAULT_CONTROL_EXCHANGE
    return [
        ("DEFAULT", [control_exchange]),
        (NOTIFICATIONS_GROUP, list(notifications_opts)),
        (OSLO_NOTIFICATIONS_GROUP, oslo_opts),
    ]
