"""Remote consoles: POST /servers/{server_id}/remote-consoles (2.6+), the legacy os-getVNCConsole,
os-getSerialConsole and os-getSPICEConsole actions (up to 2.5; 404 after, as any action Nova no longer
routes), and GET /os-console-auth-tokens/{token} (admin; 400 before 2.31, as Nova).

The API authorises the console in the database (compute/remote_consoles.py) and answers the URL of the
console proxy (``openkeel-compute console-proxy``, docs/consoles.md), which checks the token and relays to
KubeVirt's VNC or serial console of the server. Nothing is asked of the controller or the cluster here.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.schemas import remote_consoles as schema
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import errors, remote_consoles
from openkeel_compute.policies import consoles as rules

# webob's HTTPBadRequest explanation, which Nova raises bare for RDP and for tokens before 2.31
BARE_BAD_REQUEST = ("The server could not comply with the request since it is either malformed or "
                    "otherwise incorrect.")
# What Nova's API answers when its compute service raises ConsoleTypeInvalid for a legacy VNC request
# (the action does not catch it: a 500 naming the class).
_INVALID_TYPE_500 = ("Unexpected API Error. Please contact the administrator\n"
                     "<class 'nova.exception.ConsoleTypeInvalid'>")


def _authorize(req, row: dict, protocol: str, console_type: str) -> str:
    settings = remote_consoles.Settings.from_conf(common.services(req).conf)
    with common.write(req) as conn:
        return remote_consoles.authorize(conn, row, protocol, console_type, settings)


def _invalid_state_400(exc: errors.InstanceInvalidState) -> faults.Fault:
    """Nova's InstanceInvalidState when no handler catches it: its own message, as a 400."""
    return faults.BadRequest(f"Instance {exc.instance_uuid} in {exc.attr} {exc.state}. Cannot {exc.action} "
                             "while the instance is in this state.")


def _read(req, server_id: str) -> dict:
    with common.read(req) as conn:
        return read_server(conn, req, server_id)


@operation(versions="2.6-", body={"2.6-2.7": schema.create_v26, "2.8-2.98": schema.create_v28,
                                  "2.99-": schema.create_v299}, expected=(400, 404, 409, 501))
@wsgi_path_params
def create(req, server_id):
    row = _read(req, server_id)
    common.can(req, rules.REMOTE_CONSOLES, {"project_id": row["project_id"]})
    protocol = req.body["remote_console"]["protocol"]
    console_type = req.body["remote_console"]["type"]
    if protocol == "rdp":
        raise faults.BadRequest(BARE_BAD_REQUEST)
    method = {"vnc": "get_vnc_console", "spice": "get_spice_console", "serial": "get_serial_console",
              "mks": "get_mks_console"}[protocol]
    try:
        remote_consoles.check_server(row, method)
    except errors.InstanceNotReady as exc:
        raise faults.Conflict(exc.message) from None
    except errors.InstanceInvalidState as exc:
        raise _invalid_state_400(exc) from None
    with common.domain_errors():
        url = _authorize(req, row, protocol, console_type)
    return {"remote_console": {"protocol": protocol, "type": console_type, "url": url}}


def _legacy(req, server_id: str, protocol: str, console_type: str) -> dict:
    common.can(req, rules.REMOTE_CONSOLES)
    row = _read(req, server_id)
    method = {"vnc": "get_vnc_console", "spice": "get_spice_console", "serial": "get_serial_console"}[protocol]
    try:
        remote_consoles.check_server(row, method)
    except errors.InstanceNotReady as exc:
        raise faults.Conflict(exc.message) from None
    except errors.InstanceInvalidState as exc:
        if protocol != "vnc":
            raise _invalid_state_400(exc) from None
        # the VNC action answers the 409 of a state conflict, naming the server as the URL does
        raise faults.Conflict(f"Cannot '{method}' instance {server_id} while it is in {exc.attr} {exc.state}") \
            from None
    try:
        with common.domain_errors():
            url = _authorize(req, row, protocol, console_type)
    except faults.BadRequest as exc:
        if protocol == "vnc" and console_type != "novnc" and common.services(req).conf.vnc.enabled:
            raise faults.Fault(_INVALID_TYPE_500, 500) from exc
        raise
    return {"console": {"type": console_type, "url": url}}


@operation(versions="-2.5", body={"2.0-": schema.get_vnc_console}, expected=(400, 404, 409, 500, 501))
@wsgi_path_params
def get_vnc_console(req, server_id):
    return _legacy(req, server_id, "vnc", req.body["os-getVNCConsole"]["type"])


@operation(versions="-2.5", body={"2.0-": schema.get_spice_console}, expected=(400, 404, 409, 501))
@wsgi_path_params
def get_spice_console(req, server_id):
    return _legacy(req, server_id, "spice", req.body["os-getSPICEConsole"]["type"])


@operation(versions="-2.5", body={"2.0-": schema.get_serial_console}, expected=(400, 404, 409, 501))
@wsgi_path_params
def get_serial_console(req, server_id):
    return _legacy(req, server_id, "serial", req.body["os-getSerialConsole"]["type"])


@operation(query={"2.0-2.98": schema.token_query, "2.99-": schema.token_query_v299}, expected=(400, 401, 404))
@wsgi_path_params
def show_token(req, console_token):
    if req.version < (2, 31):
        raise faults.BadRequest(BARE_BAD_REQUEST)
    common.can(req, rules.CONSOLE_AUTH_TOKENS)
    if not console_token:
        raise faults.BadRequest("token not provided")
    with common.read(req) as conn:
        found = remote_consoles.validate(conn, console_token)
    if found is None:
        raise faults.NotFound("Token not found")
    body = {"instance_uuid": found.instance_uuid, "host": found.host, "port": found.port,
            "internal_access_path": found.internal_access_path}
    if found.console_type == "spice-direct" and req.version >= (2, 99):
        body["tls_port"] = found.tls_port
    return {"console": body}
