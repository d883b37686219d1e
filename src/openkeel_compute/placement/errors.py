"""What can go wrong when Placement is asked something, as domain errors.

Every error carries ``message`` (for logs and server faults). The conflicts are
``openkeel_compute.errors.Conflict`` so that an API handler maps them to 409 without knowing Placement.
"""

from __future__ import annotations

from openkeel_compute import errors


class PlacementError(errors.DomainError):
    """Placement answered something the caller cannot use (an unexpected status or body)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class PlacementNotConfigured(PlacementError):
    """``[placement]`` names no credentials (auth_type unset)."""


class PlacementUnavailable(PlacementError):
    """Placement could not be reached (refused, timed out, no endpoint in the catalog, 5xx).

    ``transport``: the keystoneauth error's class as ``module.name`` when no answer came at all."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None, *,
                 transport: BaseException | None = None) -> None:
        super().__init__(message, status, code)
        self.transport = (f"{type(transport).__module__}.{type(transport).__qualname__}"
                          if transport is not None else None)


class PlacementConflict(PlacementError, errors.Conflict):
    """409: a consumer's or a provider's generation moved on (``placement.concurrent_update``), or the
    providers no longer have the capacity asked for."""

    @property
    def concurrent_update(self) -> bool:
        return self.code == "placement.concurrent_update"


class ProviderInUse(PlacementConflict):
    """A provider still has allocations against it (it cannot be deleted, nor its inventory lowered)."""
