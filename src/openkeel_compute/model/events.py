"""Instance-action event names, as Nova's services record them (``GET .../os-instance-actions/{id}``)."""

from __future__ import annotations

BUILD = "compute__do_build_and_run_instance"
TERMINATE = "compute_terminate_instance"
START = "compute_start_instance"
STOP = "compute_stop_instance"
REBOOT = "compute_reboot_instance"
PAUSE = "compute_pause_instance"
UNPAUSE = "compute_unpause_instance"
REBUILD = "compute_rebuild_instance"
SOFT_DELETE = "compute_soft_delete_instance"
RESTORE = "compute_restore_instance"
ATTACH_INTERFACE = "compute_attach_interface"
DETACH_INTERFACE = "compute_detach_interface"
#: the conductor's event of a rebuild or evacuation, once it has found the host
REBUILD_SERVER = "rebuild_server"

# A cold resize: the conductor's and the source compute's events, then the destination's.
CONDUCTOR_MIGRATE = "conductor_migrate_server"
COLD_MIGRATE = "cold_migrate"
PREP_RESIZE = "compute_prep_resize"
RESIZE = "compute_resize_instance"
FINISH_RESIZE = "compute_finish_resize"
CONFIRM_RESIZE = "compute_confirm_resize"
REVERT_RESIZE = "compute_revert_resize"
FINISH_REVERT_RESIZE = "compute_finish_revert_resize"
#: the events a resize records, finished, before compute_resize_instance
BEFORE_RESIZE = (CONDUCTOR_MIGRATE, COLD_MIGRATE, PREP_RESIZE)

# A live migration: the conductor's, the computes' checks, then the move and its end on the destination.
CHECK_LIVE_DEST = "compute_check_can_live_migrate_destination"
CHECK_LIVE_SOURCE = "compute_check_can_live_migrate_source"
PRE_LIVE_MIGRATION = "compute_pre_live_migration"
LIVE_MIGRATION = "compute_live_migration"
POST_LIVE_MIGRATION_DEST = "compute_post_live_migration_at_destination"
ROLLBACK_LIVE_MIGRATION = "compute_rollback_live_migration_at_destination"
#: the events the checks record, finished, once the destination is claimed
BEFORE_LIVE_MIGRATION = (CONDUCTOR_MIGRATE, CHECK_LIVE_DEST, CHECK_LIVE_SOURCE, PRE_LIVE_MIGRATION)

# What Nova's compute records for operations a KubeVirt server cannot do yet (compute/unsupported.py).
SHELVE = "compute_shelve_instance"
SHELVE_OFFLOAD = "compute_shelve_offload_instance"
UNSHELVE = "compute_unshelve_instance"
RESCUE = "compute_rescue_instance"
UNRESCUE = "compute_unrescue_instance"
SNAPSHOT = "compute_snapshot_instance"
BACKUP = "compute_backup_instance"
SET_ADMIN_PASSWORD = "compute_set_admin_password"
TRIGGER_CRASH_DUMP = "compute_trigger_crash_dump"
SUSPEND = "compute_suspend_instance"
RESUME = "compute_resume_instance"
LIVE_MIGRATE = "conductor_live_migrate_instance"
ATTACH_VOLUME = "compute_attach_volume"
DETACH_VOLUME = "compute_detach_volume"
SWAP_VOLUME = "compute_swap_volume"
