"""Option groups registered per ConfigOpts.

oslo.config registers a shallow copy of the OptGroup it is given, and the copy shares the group's
table of options: a module-level OptGroup registered in several ConfigOpts would carry the options
one of them registered later (keystoneauth's plugin options, added when a credential is loaded)
into every ConfigOpts built afterwards. Each registration therefore gets a group of its own.
"""

from __future__ import annotations

from oslo_config import cfg


def own(group: cfg.OptGroup) -> cfg.OptGroup:
    """A new group with ``group``'s name, title and help, and no options yet."""
    return cfg.OptGroup(group.name, title=group.title, help=group.help,
                        dynamic_group_owner=group.dynamic_group_owner, driver_option=group.driver_option)
