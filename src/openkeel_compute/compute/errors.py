"""Domain errors of servers, carrying Nova's messages (the API maps kinds to statuses)."""

from __future__ import annotations

from openkeel_compute.errors import Conflict, Forbidden, Invalid, NotFound
from openkeel_compute.errors import DomainError as ComputeError

__all__ = ["ComputeError", "Conflict", "Forbidden", "Invalid", "NotFound"]  # the kinds, beside the errors below


class InstanceNotFound(NotFound):
    def __init__(self, instance_uuid):
        super().__init__(f"Instance {instance_uuid} could not be found.")
        self.instance_uuid = instance_uuid


class InstanceInvalidState(Conflict):
    """An action refused in the server's current state, with the message the API answers.

    ``attr`` is "vm_state", "task_state" or "launched_at"; ``state`` the value found. When the
    value is None (a server never launched), Nova's API answers the generic form.
    """

    def __init__(self, action: str, instance_uuid: str, attr: str | None, state):
        if attr is not None and state is not None:
            message = f"Cannot '{action}' instance {instance_uuid} while it is in {attr} {state}"
        else:
            message = f"Instance {instance_uuid} is in an invalid state for '{action}'"
        super().__init__(message)
        self.action = action
        self.instance_uuid = instance_uuid
        self.attr = attr
        self.state = state


class InstanceIsLocked(Conflict):
    def __init__(self, instance_uuid):
        super().__init__(f"Instance {instance_uuid} is locked")
        self.instance_uuid = instance_uuid


class InstanceNotReady(Conflict):
    """An action that needs the server's host, on a server that has none (never scheduled)."""

    def __init__(self, instance_uuid):
        super().__init__(f"Instance {instance_uuid} is not ready")
        self.instance_uuid = instance_uuid


class InvalidStatus(Invalid):
    def __init__(self):
        super().__init__("Invalid status value")


class DeletedListForbidden(Forbidden):
    def __init__(self):
        super().__init__("Only administrators may list deleted instances")


class MarkerNotFound(Invalid):
    def __init__(self, marker):
        super().__init__(f"Marker {marker} could not be found.")


class InstanceActionNotFound(NotFound):
    def __init__(self, request_id):
        super().__init__(f"Action {request_id} not found")
