"""SQLAlchemy Core tables: the flavor catalogue (Nova's API-database shape) and the controller outbox.

Uniqueness lives in the database (flavor id, name, one access row and one extra-spec row per key),
so concurrent API workers can never store duplicates; the catalogue maps an IntegrityError to
Nova's 409.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)

# Core tables only: the API and the controller run Core statements, so sqlalchemy.orm (several
# MiB per worker and tens of milliseconds of start-up) is never imported.

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uniq_%(table_name)s0%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# Ids, names and keys compare and sort by code point on every engine ("m1.Small" and "m1.small"
# are two flavors everywhere): collation "C" on PostgreSQL, and on MariaDB/MySQL utf8mb4 with the
# utf8mb4_bin collation, which the migrations give every table (table options are the
# migrations' business; keeping them out of these definitions spares every process the MySQL
# dialect import).


def ExactString(length: int):
    """A string compared and sorted by code point on every engine (PostgreSQL: collation "C")."""
    return String(length).with_variant(String(length, collation="C"), "postgresql")


metadata = MetaData(naming_convention=NAMING)

# Tables whose integer ids outlive their rows: a server's frozen flavor copy and its migrations name the
# flavor's id, the API shows the ids of key pairs and migrations and (in the instance name) of servers,
# instance action events name their action, the outbox orders by id. PostgreSQL's and MariaDB's
# sequences never hand out a value twice; SQLite does (max(id) + 1) unless the table is AUTOINCREMENT.
NEVER_REUSED: dict[str, Any] = {"sqlite_autoincrement": True}


def _timestamps() -> list[Column]:
    return [
        Column("created_at", DateTime, nullable=False, default=utcnow),
        Column("updated_at", DateTime, nullable=True),
    ]


FLAVORS = Table(
    "flavors",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavorid", ExactString(255), nullable=False),
    Column("name", ExactString(255), nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("root_gb", Integer, nullable=False),
    Column("ephemeral_gb", Integer, nullable=False, default=0),
    Column("swap", Integer, nullable=False, default=0),
    Column("rxtx_factor", Float, nullable=False, default=1.0),
    Column("vcpu_weight", Integer, nullable=True),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("is_public", Boolean, nullable=False, default=True),
    Column("description", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("flavorid"),
    UniqueConstraint("name"),
    **NEVER_REUSED,
)

FLAVOR_EXTRA_SPECS = Table(
    "flavor_extra_specs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    Column("key", ExactString(255), nullable=False),
    Column("value", String(255), nullable=True),
    *_timestamps(),
    UniqueConstraint("flavor_id", "key"),
    Index("flavor_extra_specs_flavor_id_key_idx", "flavor_id", "key"),
)

FLAVOR_PROJECTS = Table(
    "flavor_projects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    Column("project_id", ExactString(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("flavor_id", "project_id"),
)

# What the controller must apply, written in the same transaction as the catalogue change. ``id``
# orders the rows; the controller applies them in that order and sets ``done_at`` only after the
# cluster accepted the change.
OUTBOX = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime, nullable=False, default=utcnow),
    Column("kind", String(32), nullable=False),  # "flavor"
    Column("object_id", String(255), nullable=False),  # the flavor id (flavorid)
    Column("operation", String(32), nullable=False),  # "upsert" | "delete"
    Column("payload", JSON, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    Column("done_at", DateTime, nullable=True),
    Index("outbox_pending_idx", "done_at", "id"),
    **NEVER_REUSED,
)


# --- Servers -------------------------------------------------------------------------------------
# Nova's cell-database shape where the API shows it (column names, soft delete: ``deleted`` is 0
# while a row lives and takes the row's id when it is deleted, ``deleted_at`` the time), merged into
# one schema (one cell). Strings a client filters or sorts on compare by code point, as above.


class LongText(TypeDecorator):
    """MEDIUMTEXT on MariaDB/MySQL (user_data, key_data, fault details, as in Nova), TEXT elsewhere.

    The MySQL dialect is imported only by a process that talks to MySQL.
    """

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name in ("mysql", "mariadb"):
            from sqlalchemy.dialects.mysql import MEDIUMTEXT

            return dialect.type_descriptor(MEDIUMTEXT())
        return super().load_dialect_impl(dialect)



def _soft_delete() -> list[Column]:
    return [
        Column("created_at", DateTime, nullable=False, default=utcnow),
        Column("updated_at", DateTime, nullable=True),
        Column("deleted_at", DateTime, nullable=True),
        Column("deleted", Integer, nullable=False, default=0),
    ]


INSTANCES = Table(
    "instances",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=False),
    Column("user_id", ExactString(255), nullable=True),
    Column("project_id", ExactString(255), nullable=True),
    Column("display_name", ExactString(255), nullable=True),
    Column("display_description", ExactString(255), nullable=True),
    Column("hostname", ExactString(255), nullable=True),
    Column("image_ref", ExactString(255), nullable=True),
    Column("kernel_id", ExactString(255), nullable=True),
    Column("ramdisk_id", ExactString(255), nullable=True),
    Column("launch_index", Integer, nullable=True),
    Column("key_name", ExactString(255), nullable=True),
    Column("key_data", LongText(), nullable=True),
    Column("user_data", LongText(), nullable=True),
    Column("power_state", Integer, nullable=True),
    Column("vm_state", ExactString(255), nullable=True),
    Column("task_state", ExactString(255), nullable=True),
    # Sizes of the current flavor, as Nova keeps them beside the flavor copy (quota counting and
    # the flavor filters read them without parsing JSON).
    Column("memory_mb", Integer, nullable=True),
    Column("vcpus", Integer, nullable=True),
    Column("root_gb", Integer, nullable=True),
    Column("ephemeral_gb", Integer, nullable=True),
    Column("instance_type_id", Integer, nullable=True),
    # host: the compute service (OS-EXT-SRV-ATTR:host); node: the hypervisor host name
    # (OS-EXT-SRV-ATTR:hypervisor_hostname), on KubeVirt the Kubernetes node of the VMI.
    Column("host", ExactString(255), nullable=True),
    Column("node", ExactString(255), nullable=True),
    Column("launched_on", Text, nullable=True),
    Column("reservation_id", ExactString(255), nullable=True),
    Column("launched_at", DateTime, nullable=True),
    Column("terminated_at", DateTime, nullable=True),
    Column("availability_zone", ExactString(255), nullable=True),
    Column("locked", Boolean, nullable=False, default=False),
    Column("locked_by", String(5), nullable=True),  # "owner" | "admin"
    Column("locked_reason", String(255), nullable=True),
    Column("os_type", String(255), nullable=True),
    Column("architecture", String(255), nullable=True),
    Column("vm_mode", String(255), nullable=True),
    Column("root_device_name", String(255), nullable=True),
    Column("default_ephemeral_device", String(255), nullable=True),
    Column("default_swap_device", String(255), nullable=True),
    Column("config_drive", String(255), nullable=True),
    Column("access_ip_v4", String(39), nullable=True),
    Column("access_ip_v6", String(39), nullable=True),
    Column("auto_disk_config", Boolean, nullable=True),
    Column("progress", Integer, nullable=True),
    Column("shutdown_terminate", Boolean, nullable=True, default=False),
    Column("disable_terminate", Boolean, nullable=True, default=False),
    Column("cleaned", Integer, nullable=True, default=0),
    Column("hidden", Boolean, nullable=True, default=False),
    Column("pinned_availability_zone", ExactString(255), nullable=True),
    # Nova's instance_extra.flavor: {"cur": <Flavor primitive>, "old": ..., "new": ...}, JSON text.
    Column("flavor", Text, nullable=True),
    # JSON text of what Nova keeps beside the instance and the API shows: the addresses by network
    # (Nova's network info cache, here written by the controller from the VMI's interfaces), the
    # trusted image certificate ids (2.63) and the scheduler hints of the boot request (2.100).
    Column("network_info", Text, nullable=True),
    Column("trusted_certs", Text, nullable=True),
    Column("scheduler_hints", Text, nullable=True),
    # Where the controller finds the server's objects: the project's namespace and the
    # VirtualMachine's name.
    Column("namespace", String(63), nullable=True),
    Column("vm_name", String(63), nullable=True),
    *_soft_delete(),
    UniqueConstraint("uuid"),
    Index("instances_project_id_deleted_idx", "project_id", "deleted"),
    Index("instances_reservation_id_idx", "reservation_id"),
    Index("instances_terminated_at_launched_at_idx", "terminated_at", "launched_at"),
    Index("instances_uuid_deleted_idx", "uuid", "deleted"),
    Index("instances_task_state_updated_at_idx", "task_state", "updated_at"),
    Index("instances_host_node_deleted_idx", "host", "node", "deleted"),
    Index("instances_deleted_created_at_idx", "deleted", "created_at"),
    Index("instances_updated_at_project_id_idx", "updated_at", "project_id"),
    **NEVER_REUSED,
)

# Key/value rows of a server: user metadata (the API's ``metadata``) and system metadata (image
# properties at boot and other values the API never shows as such). One live row per key.
INSTANCE_METADATA = Table(
    "instance_metadata",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=False),
    Column("key", ExactString(255), nullable=False),
    Column("value", String(255), nullable=True),
    *_soft_delete(),
    UniqueConstraint("instance_uuid", "key", "deleted"),
)

INSTANCE_SYSTEM_METADATA = Table(
    "instance_system_metadata",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=False),
    Column("key", ExactString(255), nullable=False),
    Column("value", String(255), nullable=True),
    *_soft_delete(),
    UniqueConstraint("instance_uuid", "key", "deleted"),
)

# The controller's working state of a server (not Nova's): what a restarted controller needs to carry
# on a move or a build, some of it longer than system metadata's 255 characters (a resize's matchers and
# revisions as JSON, the node names a build was tried on). Keys are model.sysmeta's ``openkeel_``
# names listed in ``sysmeta.WORKING_STATE``; a value is unbounded text. No soft delete: an item unset is
# gone, and the rows of a server go with its working state once its delete completes.
INSTANCE_CONTROLLER_STATE = Table(
    "instance_controller_state",
    metadata,
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), primary_key=True, nullable=False),
    Column("key", ExactString(255), primary_key=True, nullable=False),
    Column("value", Text, nullable=False),
    *_timestamps(),
)

# Tags (2.26): no soft delete, as in Nova; a server's tags go when its row is purged.
TAGS = Table(
    "tags",
    metadata,
    Column("resource_id", ExactString(36), primary_key=True, nullable=False),
    Column("tag", ExactString(80), primary_key=True, nullable=False),
    Index("tags_tag_idx", "tag"),
)

INSTANCE_ACTIONS = Table(
    "instance_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("action", String(255), nullable=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=True),
    Column("request_id", ExactString(255), nullable=True),
    Column("user_id", String(255), nullable=True),
    Column("project_id", String(255), nullable=True),
    Column("start_time", DateTime, nullable=True, default=utcnow),
    Column("finish_time", DateTime, nullable=True),
    Column("message", String(255), nullable=True),
    *_soft_delete(),
    Index("instance_uuid_idx", "instance_uuid"),
    Index("request_id_idx", "request_id"),
    Index("instance_actions_instance_uuid_updated_at_idx", "instance_uuid", "updated_at"),
    **NEVER_REUSED,
)

INSTANCE_ACTIONS_EVENTS = Table(
    "instance_actions_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event", String(255), nullable=True),
    Column("action_id", Integer, ForeignKey("instance_actions.id"), nullable=True),
    Column("start_time", DateTime, nullable=True, default=utcnow),
    Column("finish_time", DateTime, nullable=True),
    Column("result", String(255), nullable=True),
    Column("traceback", Text, nullable=True),
    Column("host", String(255), nullable=True),
    Column("details", Text, nullable=True),
    *_soft_delete(),
    Index("instance_actions_events_action_id_idx", "action_id"),
    **NEVER_REUSED,
)

INSTANCE_FAULTS = Table(
    "instance_faults",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=True),
    Column("code", Integer, nullable=False),
    Column("message", String(255), nullable=True),
    Column("details", LongText(), nullable=True),
    Column("host", String(255), nullable=True),
    *_soft_delete(),
    Index("instance_faults_host_idx", "host"),
    Index("instance_faults_instance_uuid_deleted_created_at_idx", "instance_uuid", "deleted", "created_at"),
)

# Key pairs (Nova's API-database shape): one name per user; ``type`` is "ssh" or "x509".
KEY_PAIRS = Table(
    "key_pairs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", ExactString(255), nullable=False),
    Column("user_id", ExactString(255), nullable=False),
    Column("fingerprint", String(255), nullable=True),
    Column("public_key", Text, nullable=True),
    Column("type", String(4), nullable=False, default="ssh"),
    *_timestamps(),
    UniqueConstraint("user_id", "name"),
    **NEVER_REUSED,
)

# Quota limits: per project, per user in a project, per class ("default" feeds every project).
QUOTAS = Table(
    "quotas",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project_id", ExactString(255), nullable=False),
    Column("resource", ExactString(255), nullable=False),
    Column("hard_limit", Integer, nullable=True),
    *_timestamps(),
    UniqueConstraint("project_id", "resource"),
)

PROJECT_USER_QUOTAS = Table(
    "project_user_quotas",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project_id", ExactString(255), nullable=False),
    Column("user_id", ExactString(255), nullable=False),
    Column("resource", ExactString(255), nullable=False),
    Column("hard_limit", Integer, nullable=True),
    *_timestamps(),
    UniqueConstraint("user_id", "project_id", "resource"),
    Index("project_user_quotas_project_id_idx", "project_id"),
)

QUOTA_CLASSES = Table(
    "quota_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("class_name", ExactString(255), nullable=False),
    Column("resource", ExactString(255), nullable=False),
    Column("hard_limit", Integer, nullable=True),
    *_timestamps(),
    UniqueConstraint("class_name", "resource"),
)

# The cluster's nodes and their topology.kubernetes.io/zone label, published by the controller
# (the API never calls the cluster); availability zones are read from here. available: the node
# reports Ready (a compute service that is up); cordoned: spec.unschedulable (a disabled service).
NODE_ZONES = Table(
    "node_zones",
    metadata,
    Column("node", ExactString(255), primary_key=True),
    Column("zone", ExactString(255), nullable=True),
    Column("available", Boolean, nullable=False, default=True),
    Column("cordoned", Boolean, nullable=False, default=False, server_default=false()),
    Column("updated_at", DateTime, nullable=False, default=utcnow),
)


# One nova-compute service per cluster node (Nova's services and compute_nodes tables in one): the
# controller creates a row for each node it sees and keeps ``last_seen_up`` (the last time it saw the
# node Ready: the heartbeat Nova's servicegroup reads) and the node's capacity; the API's os-services
# writes disabled/disabled_reason/forced_down and sets ``cordon_pending``, which the controller clears
# once the node's spec.unschedulable says the same. A row outlives its node until deleted (DELETE
# /os-services/{id}), as a Nova service record outlives its compute host.
COMPUTE_SERVICES = Table(
    "compute_services",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=False),
    Column("host", ExactString(255), nullable=False),
    Column("binary", ExactString(255), nullable=False, default="nova-compute"),
    Column("disabled", Boolean, nullable=False, default=False, server_default=false()),
    Column("disabled_reason", String(255), nullable=True),
    Column("forced_down", Boolean, nullable=False, default=False, server_default=false()),
    Column("cordon_pending", Boolean, nullable=False, default=False, server_default=false()),
    Column("last_seen_up", DateTime, nullable=True),
    Column("vcpus", Integer, nullable=False, default=0),
    Column("memory_mb", Integer, nullable=False, default=0),
    Column("local_gb", Integer, nullable=False, default=0),
    Column("host_ip", String(64), nullable=True),
    Column("hypervisor_version", Integer, nullable=False, default=0),
    Column("node_uuid", ExactString(36), nullable=True),
    Column("cpu_info", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("uuid"),
    UniqueConstraint("host", "binary"),
    **NEVER_REUSED,
)


# Server groups (Nova's API-database instance_groups, its policy and members): one policy per group
# (affinity, anti-affinity, soft-affinity, soft-anti-affinity) and its rules (2.64's
# max_server_per_host) as JSON; a member row per server booted with the group's scheduler hint. Groups
# are deleted for good, as Nova's are; a member whose server is deleted stays until the group goes and
# is not shown.
SERVER_GROUPS = Table(
    "server_groups",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=False),
    Column("name", String(255), nullable=True),
    Column("project_id", ExactString(255), nullable=False),
    Column("user_id", ExactString(255), nullable=False),
    Column("policy", String(255), nullable=False),
    Column("rules", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("uuid"),
    Index("server_groups_project_id_idx", "project_id"),
    **NEVER_REUSED,
)

SERVER_GROUP_MEMBERS = Table(
    "server_group_members",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("group_id", Integer, ForeignKey("server_groups.id", ondelete="CASCADE"), nullable=False),
    Column("instance_uuid", ExactString(36), nullable=False),
    *_timestamps(),
    UniqueConstraint("group_id", "instance_uuid"),
    Index("server_group_members_instance_uuid_idx", "instance_uuid"),
    **NEVER_REUSED,
)


# Host aggregates (Nova's API-database aggregates, aggregate_hosts, aggregate_metadata): deleted for good
# as Nova's are. The controller mirrors each into a Placement aggregate of the same uuid on its hosts'
# providers, and gives a host of an aggregate with availability_zone metadata that zone (its node's label).
AGGREGATES = Table(
    "aggregates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=False),
    Column("name", ExactString(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("uuid"),
    UniqueConstraint("name"),
    **NEVER_REUSED,
)

AGGREGATE_HOSTS = Table(
    "aggregate_hosts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("aggregate_id", Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False),
    Column("host", ExactString(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("host", "aggregate_id"),
    **NEVER_REUSED,
)

AGGREGATE_METADATA = Table(
    "aggregate_metadata",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("aggregate_id", Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False),
    Column("key", ExactString(255), nullable=False),
    Column("value", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("aggregate_id", "key"),
    **NEVER_REUSED,
)


# Moves of a server between flavors or nodes (Nova's migrations table): one row per resize (and,
# later, per cold or live migration), the API's os-migrations and /servers/{id}/migrations.
# old/new_instance_type_id are the flavors' internal ids; the flavor bodies stay in
# instances.flavor ("old"/"new") so that a deleted flavor still reverts.
MIGRATIONS = Table(
    "migrations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=True),
    Column("source_compute", String(255), nullable=True),
    Column("dest_compute", String(255), nullable=True),
    Column("source_node", String(255), nullable=True),
    Column("dest_node", String(255), nullable=True),
    Column("dest_host", String(255), nullable=True),
    Column("old_instance_type_id", Integer, nullable=True),
    Column("new_instance_type_id", Integer, nullable=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=True),
    # "migration" | "resize" | "live-migration" | "evacuation"
    Column("migration_type", String(16), nullable=True),
    Column("hidden", Boolean, nullable=True, default=False),
    Column("memory_total", BigInteger, nullable=True),
    Column("memory_processed", BigInteger, nullable=True),
    Column("memory_remaining", BigInteger, nullable=True),
    Column("disk_total", BigInteger, nullable=True),
    Column("disk_processed", BigInteger, nullable=True),
    Column("disk_remaining", BigInteger, nullable=True),
    Column("status", String(255), nullable=True),
    Column("cross_cell_move", Boolean, nullable=True, default=False),
    Column("user_id", ExactString(255), nullable=True),
    Column("project_id", ExactString(255), nullable=True),
    *_soft_delete(),
    UniqueConstraint("uuid"),
    Index("migrations_instance_uuid_and_status_idx", "deleted", "instance_uuid", "status"),
    Index("migrations_updated_at_idx", "updated_at"),
    **NEVER_REUSED,
)

# A server's console log as the controller last read it from the cluster (the API never calls the
# cluster): the API records a request (requested_at, length), the controller answers it
# (answered_at, output or error).
CONSOLE_LOGS = Table(
    "console_logs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), nullable=False),
    Column("requested_at", DateTime, nullable=True),
    Column("length", Integer, nullable=True),
    Column("answered_at", DateTime, nullable=True),
    Column("output", LongText(), nullable=True),
    Column("error", String(255), nullable=True),
    UniqueConstraint("instance_uuid"),
)

# One counter per collection whose rendered pages the API keeps (api/page_cache.py), raised in the
# transaction of every change to the collection's tables, so a page is reused only while the
# counter it was rendered at is still the committed one: ``flavors`` by the database's triggers
# (migration 0005), ``servers`` by every writing connection right before COMMIT (db/generations.py).
GENERATIONS = Table(
    "generations",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

# Runs of periodic tasks per compute host and period (Nova's task_log): the instance usage audit
# ("instance_usage_audit") records one row per host and audit period; os-instance_usage_audit_log
# reads them.
TASK_LOG = Table(
    "task_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_name", String(255), nullable=False),
    Column("state", String(255), nullable=False),  # "RUNNING" | "DONE"
    Column("host", ExactString(255), nullable=False),
    Column("period_beginning", DateTime, nullable=False, default=utcnow),
    Column("period_ending", DateTime, nullable=False, default=utcnow),
    Column("message", String(255), nullable=False),
    Column("task_items", Integer, nullable=True, default=0),
    Column("errors", Integer, nullable=True, default=0),
    *_soft_delete(),
    UniqueConstraint("task_name", "host", "period_beginning", "period_ending",
                     name="uniq_task_log0task_name0host0period_beginning0period_ending"),  # Nova's name
    Index("ix_task_log_period_beginning", "period_beginning"),
    Index("ix_task_log_host", "host"),
    Index("ix_task_log_period_ending", "period_ending"),
)

# The networks and ports a server was booted with when Neutron is the network service (Nova keeps
# them in the request spec's requested_networks): one row per requested interface, in the order
# asked. The API writes network_id (a port's own network once checked), port_id (a port the user
# passed), fixed_ip and tag; the controller fills port_id of the ports it creates and sets
# port_created for them (deleted with the server, where a user's port is only unbound).
INSTANCE_NETWORK_REQUESTS = Table(
    "instance_network_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("network_id", ExactString(36), nullable=True),
    Column("port_id", ExactString(36), nullable=True),
    Column("fixed_ip", String(39), nullable=True),
    Column("tag", String(60), nullable=True),
    Column("port_created", Boolean, nullable=False, default=False, server_default=false()),
    *_soft_delete(),
    UniqueConstraint("instance_uuid", "position", "deleted", name="uniq_instance_network_requests0position"),
)

# Events from other services (POST /os-server-external-events: Neutron's network-vif-plugged, ...,
# Cinder's volume-extended) accepted for a server on a host, for the controller to act on (release
# a wait for plugged ports, refresh or drop an interface). handled_at is set once consumed.
INSTANCE_EXTERNAL_EVENTS = Table(
    "instance_external_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", ExactString(36), nullable=False),
    Column("name", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("tag", String(255), nullable=True),
    Column("host", ExactString(255), nullable=True),
    Column("created_at", DateTime, nullable=False, default=utcnow),
    Column("handled_at", DateTime, nullable=True),
    Index("ix_instance_external_events_instance_uuid", "instance_uuid"),
    Index("ix_instance_external_events_handled_at", "handled_at"),
)

# The block devices of each server, as Nova's block_device_mapping table: the image's root disk
# (source image, destination local), the volumes (existing, or made by the controller from an
# image, a snapshot or nothing), the flavor's ephemeral and swap disks. The API writes them at boot
# (with the reserved Cinder attachment of each existing volume) and on attach; the controller fills
# volume_id of the volumes it creates and connection_info once Cinder exports a volume to the node.
# uuid is the mapping's id the API shows from 2.89 (bdm_uuid).
BLOCK_DEVICE_MAPPING = Table(
    "block_device_mapping",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", ExactString(36), nullable=False),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=False),
    Column("source_type", String(255), nullable=True),
    Column("destination_type", String(255), nullable=True),
    Column("guest_format", String(255), nullable=True),
    Column("device_type", String(255), nullable=True),
    Column("disk_bus", String(255), nullable=True),
    Column("boot_index", Integer, nullable=True),
    Column("device_name", String(255), nullable=True),
    Column("delete_on_termination", Boolean, nullable=False, default=False, server_default=false()),
    Column("snapshot_id", ExactString(36), nullable=True),
    Column("volume_id", ExactString(36), nullable=True),
    Column("volume_size", Integer, nullable=True),
    Column("image_id", ExactString(36), nullable=True),
    Column("no_device", Boolean, nullable=True),
    Column("connection_info", LongText(), nullable=True),
    Column("tag", String(255), nullable=True),
    Column("attachment_id", ExactString(36), nullable=True),
    Column("volume_type", String(255), nullable=True),
    *_soft_delete(),
    UniqueConstraint("uuid", name="uniq_block_device_mapping0uuid"),
    Index("block_device_mapping_instance_uuid_idx", "instance_uuid"),
    Index("block_device_mapping_instance_uuid_volume_id_idx", "instance_uuid", "volume_id"),
    **NEVER_REUSED,
)

# Remote console authorisations (Nova's console_auth_tokens): the API stores one per console URL it
# hands out, with the SHA-256 of the token (the token itself is only in the URL), the node and port the
# console is on and when it expires; the console proxy validates a token against its row. Removed with
# the server.
CONSOLE_AUTH_TOKENS = Table(
    "console_auth_tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("token_hash", String(255), nullable=False),
    Column("console_type", String(255), nullable=False),
    Column("host", ExactString(255), nullable=False),
    Column("port", Integer, nullable=True),
    Column("tls_port", Integer, nullable=True),
    Column("internal_access_path", String(255), nullable=True),
    Column("instance_uuid", ExactString(36), ForeignKey("instances.uuid"), nullable=False),
    Column("access_url_base", Text, nullable=True),
    Column("expires", Integer, nullable=False),
    *_timestamps(),
    UniqueConstraint("token_hash"),
    Index("console_auth_tokens_instance_uuid_idx", "instance_uuid"),
    Index("console_auth_tokens_host_expires_idx", "host", "expires"),
)
