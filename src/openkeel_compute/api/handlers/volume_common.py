"""What every handler that talks to Cinder shares ([cinder] auth_type or endpoint_template set):
whether Cinder is the block storage service, the process's Cinder client, and the API's answer to a
Cinder error (Nova's: an unreachable Cinder is its generic 500 naming CinderConnectionFailed). Used
by the boot's block device checks (server_volumes.py) and os-volume_attachments.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.conf import cinder as cinder_conf
from openkeel_compute.volume import errors as volume_errors

CONNECTION_FAILED = "Unexpected API Error. Please contact the administrator\n<class 'nova.exception.CinderConnectionFailed'>"
NOT_AVAILABLE = ("Block Device Mapping is Invalid: volumes are not available: this cloud has no block storage "
                 "service ([cinder] is not configured).")


def enabled(req) -> bool:
    return cinder_conf.configured(common.services(req).conf)


def client(req):
    """The process's Cinder client, made on first use (keystoneauth is imported then, not at start)."""
    services = common.services(req)
    found = getattr(services, "volume", None)
    if found is None:
        from openkeel_compute.volume.client import CinderClient

        found = services.volume = CinderClient(services.conf)
    return found


def calls(req):
    """Cinder as the caller (their token, and the service token beside it when configured)."""
    return client(req).for_caller(req.context, req.environ)


def answer(exc: volume_errors.VolumeError) -> faults.Fault:
    """The API's answer to a Cinder error that reaches it unchanged, as Nova's API answers it."""
    if isinstance(exc, volume_errors.CinderUnavailable):
        return faults.Fault(CONNECTION_FAILED, 500)
    if exc.code == 400:
        return faults.BadRequest(exc.message)
    if exc.code == 403:
        return faults.Forbidden(exc.message)
    if exc.code == 404:
        return faults.NotFound(exc.message)
    if exc.code == 409:
        return faults.Conflict(exc.message)
    if exc.code == 401:
        return faults.Fault(exc.message, 401)
    return faults.Fault(exc.message, 500)
