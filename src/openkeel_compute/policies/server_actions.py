"""The rules of the server actions built so far, under Nova 34.0.0's names and defaults."""

from oslo_policy import policy

from openkeel_compute.policies import base

SERVERS = "os_compute_api:servers:%s"
PAUSE = "os_compute_api:os-pause-server:%s"
LOCK = "os_compute_api:os-lock-server:%s"
CONSOLE_OUTPUT = "os_compute_api:os-console-output"
SUSPEND = "os_compute_api:os-suspend-server:%s"

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
]


def list_rules():
    return rules
