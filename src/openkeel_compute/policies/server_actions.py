"""The rules of the server actions built so far, under Nova 34.0.0's names and defaults."""

from oslo_policy import policy

from openkeel_compute.policies import base

SERVERS = "os_compute_api:servers:%s"
PAUSE = "os_compute_api:os-pause-server:%s"
LOCK = "os_compute_api:os-lock-server:%s"
CONSOLE_OUTPUT = "os_compute_api:os-console-output"
SUSPEND = "os_compute_api:os-suspend-server:%s"
ADMIN_ACTIONS = "os_compute_api:os-admin-actions:%s"
DEFERRED_DELETE = "os_compute_api:os-deferred-delete:%s"
ADMIN_PASSWORD = "os_compute_api:os-admin-password"
CREATE_BACKUP = "os_compute_api:os-create-backup"
SHELVE = "os_compute_api:os-shelve:%s"
RESCUE = "os_compute_api:os-rescue"
UNRESCUE = "os_compute_api:os-unrescue"
MIGRATE = "os_compute_api:os-migrate-server:%s"
EVACUATE = "os_compute_api:os-evacuate"

_ACTION = "/servers/{server_id}/action (%s)"


def _rule(name, check_str, description, action):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": "POST", "path": _ACTION % action}],
                                        scope_types=["project"])


rules = [
    _rule(SERVERS % "start", base.PROJECT_MEMBER_OR_ADMIN, "Start a server", "os-start"),
    _rule(SERVERS % "stop", base.PROJECT_MEMBER_OR_ADMIN, "Stop a server", "os-stop"),
    _rule(SERVERS % "reboot", base.PROJECT_MEMBER_OR_ADMIN, "Reboot a server", "reboot"),
    _rule(PAUSE % "pause", base.PROJECT_MEMBER_OR_ADMIN, "Pause a server", "pause"),
    _rule(PAUSE % "unpause", base.PROJECT_MEMBER_OR_ADMIN, "Unpause a paused server", "unpause"),
    _rule(LOCK % "lock", base.PROJECT_MEMBER_OR_ADMIN, "Lock a server", "lock"),
    _rule(LOCK % "unlock", base.PROJECT_MEMBER_OR_ADMIN, "Unlock a server", "unlock"),
    _rule(LOCK % "unlock:unlock_override", base.ADMIN,
          "Unlock a server locked by someone else (an administrator's lock, for its owner)", "unlock"),
    _rule(CONSOLE_OUTPUT, base.PROJECT_MEMBER_OR_ADMIN, "Show the console output of a server",
          "os-getConsoleOutput"),
    _rule(SUSPEND % "resume", base.PROJECT_MEMBER_OR_ADMIN, "Resume a suspended server", "resume"),
    _rule(SUSPEND % "suspend", base.PROJECT_MEMBER_OR_ADMIN, "Suspend a server", "suspend"),
    _rule(SERVERS % "rebuild", base.PROJECT_MEMBER_OR_ADMIN, "Rebuild a server", "rebuild"),
    _rule(SERVERS % "rebuild:trusted_certs", base.PROJECT_MEMBER_OR_ADMIN,
          "Rebuild a server with trusted image certificate IDs", "rebuild"),
    _rule(SERVERS % "resize", base.PROJECT_MEMBER_OR_ADMIN, "Resize a server", "resize"),
    _rule(SERVERS % "confirm_resize", base.PROJECT_MEMBER_OR_ADMIN, "Confirm a server resize", "confirmResize"),
    _rule(SERVERS % "revert_resize", base.PROJECT_MEMBER_OR_ADMIN, "Revert a server resize", "revertResize"),
    _rule(SERVERS % "create_image", base.PROJECT_MEMBER_OR_ADMIN, "Create an image from a server", "createImage"),
    _rule(SERVERS % "create_image:allow_volume_backed", base.PROJECT_MEMBER_OR_ADMIN,
          "Create an image from a volume backed server", "createImage"),
    _rule(SERVERS % "trigger_crash_dump", base.PROJECT_MEMBER_OR_ADMIN, "Trigger crash dump in a server",
          "trigger_crash_dump"),
    _rule(ADMIN_ACTIONS % "reset_state", base.ADMIN, "Reset the state of a given server", "os-resetState"),
    _rule(ADMIN_ACTIONS % "inject_network_info", base.ADMIN, "Inject network information into the server",
          "injectNetworkInfo"),
    _rule(DEFERRED_DELETE % "restore", base.PROJECT_MEMBER_OR_ADMIN, "Restore a soft deleted server", "restore"),
    _rule(DEFERRED_DELETE % "force", base.PROJECT_MEMBER_OR_ADMIN, "Force delete a server before deferred cleanup",
          "forceDelete"),
    _rule(ADMIN_PASSWORD, base.PROJECT_MEMBER_OR_ADMIN, "Change the administrative password for a server",
          "changePassword"),
    _rule(CREATE_BACKUP, base.PROJECT_MEMBER_OR_ADMIN, "Create a back up of a server", "createBackup"),
    _rule(SHELVE % "shelve", base.PROJECT_MEMBER_OR_ADMIN, "Shelve server", "shelve"),
    _rule(SHELVE % "unshelve", base.PROJECT_MEMBER_OR_ADMIN, "Unshelve (restore) shelved server", "unshelve"),
    _rule(SHELVE % "unshelve_to_host", base.ADMIN, "Unshelve (restore) shelve offloaded server to a specific host",
          "unshelve"),
    _rule(SHELVE % "shelve_offload", base.ADMIN, "Shelf-offload (remove) server", "shelveOffload"),
    _rule(RESCUE, base.PROJECT_MEMBER_OR_ADMIN, "Rescue a server", "rescue"),
    _rule(UNRESCUE, base.PROJECT_MEMBER_OR_ADMIN, "Unrescue a server", "unrescue"),
    _rule(MIGRATE % "migrate", base.PROJECT_MANAGER_OR_ADMIN, "Cold migrate a server without specifying a host",
          "migrate"),
    _rule(MIGRATE % "migrate:host", base.ADMIN, "Cold migrate a server to a specified host", "migrate"),
    _rule(MIGRATE % "migrate_live", base.PROJECT_MANAGER_OR_ADMIN,
          "Live migrate a server to a new host without a reschedule", "os-migrateLive"),
    _rule(MIGRATE % "migrate_live:host", base.ADMIN, "Live migrate a server to a specified host", "os-migrateLive"),
    _rule(EVACUATE, base.ADMIN, "Evacuate a server from a failed host to a new host", "evacuate"),
]


def list_rules():
    return rules
