"""The rules of remote consoles, console authorisation tokens, diagnostics and topology, under Nova
34.0.0's names and defaults."""

from oslo_policy import policy

from openkeel_compute.policies import base

REMOTE_CONSOLES = "os_compute_api:os-remote-consoles"
CONSOLE_AUTH_TOKENS = "os_compute_api:os-console-auth-tokens"
DIAGNOSTICS = "os_compute_api:os-server-diagnostics"
TOPOLOGY = "compute:server:topology:%s"

_ACTION = "/servers/{server_id}/action (%s)"

rules = [
    policy.DocumentedRuleDefault(
        name=REMOTE_CONSOLES, check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description="Generate a URL to access remote server console (POST /remote-consoles and the deprecated "
                    "os-getSerialConsole, os-getSPICEConsole and os-getVNCConsole actions)",
        operations=[{"method": "POST", "path": _ACTION % "os-getSerialConsole"},
                    {"method": "POST", "path": _ACTION % "os-getSPICEConsole"},
                    {"method": "POST", "path": _ACTION % "os-getVNCConsole"},
                    {"method": "POST", "path": "/servers/{server_id}/remote-consoles"}],
        scope_types=["project"]),
    policy.DocumentedRuleDefault(
        name=CONSOLE_AUTH_TOKENS, check_str=base.ADMIN,
        description="Show console connection information for a given console authentication token",
        operations=[{"method": "GET", "path": "/os-console-auth-tokens/{console_token}"}], scope_types=["project"]),
    policy.DocumentedRuleDefault(
        name=DIAGNOSTICS, check_str=base.ADMIN, description="Show the usage data for a server",
        operations=[{"method": "GET", "path": "/servers/{server_id}/diagnostics"}], scope_types=["project"]),
    policy.DocumentedRuleDefault(
        name=TOPOLOGY % "index", check_str=base.PROJECT_READER_OR_ADMIN,
        description="Show the NUMA topology data for a server",
        operations=[{"method": "GET", "path": "/servers/{server_id}/topology"}], scope_types=["project"]),
    policy.DocumentedRuleDefault(
        name=TOPOLOGY % "host:index", check_str=base.ADMIN,
        description="Show the NUMA topology data for a server with host NUMA ID and CPU pinning information",
        operations=[{"method": "GET", "path": "/servers/{server_id}/topology"}], scope_types=["project"]),
]


def list_rules():
    return rules
