"""The operations Nova 34.0.0 still routes but has removed (``@wsgi.removed`` in its source).

Every one answers 410 with Nova's message at every microversion, before anything is looked up
(a server in the URL need not exist) and whatever the body or the query: Nova's schemas for them
are empty. A body that is not JSON is still Nova's 400 "Malformed request body", as Nova parses it
before dispatching. Nova itself answers 500 (a KeyError in its query-string check) when a query
string is sent to a removed GET; OpenKeel answers the 410 a correct Nova would (docs/api.md).

``os-getRDPConsole`` is marked removed too, but its handler answers webob's bare 400 (up to 2.5,
the console actions' last version; 404 after), and so it is answered here.
"""

from __future__ import annotations

from openkeel_compute.api import faults
from openkeel_compute.api.wsgi import operation

GONE = "This resource is no longer available. No forwarding address is given."
# webob's HTTPBadRequest explanation, which Nova's removed RDP console handler raises bare
BARE_BAD_REQUEST = ("The server could not comply with the request since it is either malformed or "
                    "otherwise incorrect.")


@operation(success=410, expected=(410,), removed=True)
def gone(req, **params):
    raise faults.Fault(GONE, 410)


@operation(versions="-2.5", success=400, expected=(400,), removed=True)
def rdp_console(req, server_id):
    raise faults.BadRequest(BARE_BAD_REQUEST)
