"""The kinds of domain error the catalogue and the server state raise, each carrying Nova's message.

The API maps a kind to its status in one place (``api.common.domain_errors``): NotFound 404,
Conflict 409, Invalid 400, Forbidden 403.
"""

from __future__ import annotations


class DomainError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    """404."""


class Conflict(DomainError):
    """409."""


class Invalid(DomainError):
    """400."""


class Forbidden(DomainError):
    """403."""
