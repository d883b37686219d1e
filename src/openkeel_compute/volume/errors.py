"""Cinder's failures as Nova 34.0.0 names them (nova/exception.py), with their API codes.

``message`` is the text Nova's API answers; ``code`` the status it answers with when the error
reaches the API unchanged.
"""

from __future__ import annotations


class VolumeError(Exception):
    code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CinderUnavailable(VolumeError):
    """Cinder cannot be reached (Nova's CinderConnectionFailed)."""

    code = 503

    def __init__(self, reason: str) -> None:
        super().__init__(f"Connection to cinder host failed: {reason}")


class Unauthorized(VolumeError):
    code = 401

    def __init__(self) -> None:
        super().__init__("The request you have made requires authentication.")


class CinderError(VolumeError):
    """Another refusal from Cinder: its status and its words as cinderclient renders them."""

    def __init__(self, message: str, status: int, cinder_text: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.cinder_text = cinder_text if cinder_text is not None else message
        self.code = status if 400 <= status < 500 else 500

    @property
    def reason(self) -> str:
        return self.message


class InvalidInput(VolumeError):
    """Cinder answered 400 (Nova's InvalidInput)."""

    code = 400

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid input received: {reason}")
        self.reason = reason


class Forbidden(VolumeError):
    code = 403


class OverQuota(VolumeError):
    code = 403


class NotFound(VolumeError):
    """Cinder's 404 where Nova passes Cinder's words on (a volume's create)."""

    code = 404


class VolumeNotFound(VolumeError):
    code = 404

    def __init__(self, volume_id: str) -> None:
        super().__init__(f"Volume {volume_id} could not be found.")
        self.volume_id = volume_id


class SnapshotNotFound(VolumeError):
    code = 404

    def __init__(self, snapshot_id: str) -> None:
        super().__init__(f"Snapshot {snapshot_id} could not be found.")


class AttachmentNotFound(VolumeError):
    code = 404

    def __init__(self, attachment_id: str) -> None:
        super().__init__(f"Volume attachment {attachment_id} could not be found.")


class VolumeTypeNotFound(VolumeError):
    code = 404

    def __init__(self, id_or_name: str) -> None:
        super().__init__(f"Volume type {id_or_name} could not be found.")
