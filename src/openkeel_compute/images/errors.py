"""What can go wrong when the image service is asked for an image, as Nova's API reports it at boot.

``str(error)`` is the text of Nova's own exception (what a log line says); ``code`` and
``explanation`` are the status and message ``POST /servers`` answers with, as Nova 34.0.0's
servers API turns that exception into a response.
"""

from __future__ import annotations


class ImageError(Exception):
    """An image service failure; ``nova_exception`` names the Nova exception it stands for."""

    nova_exception = "NovaException"
    code = 500

    def __init__(self, message: str, explanation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.explanation = explanation if explanation is not None else message


class ImageNotFound(ImageError):
    nova_exception = "ImageNotFound"
    code = 400

    def __init__(self, image_id: str) -> None:
        self.image_id = image_id
        super().__init__(f"Image {image_id} could not be found.", "Can not find requested image")


class ImageNotAuthorized(ImageError):
    nova_exception = "ImageNotAuthorized"
    code = 400

    def __init__(self, image_id: str) -> None:
        self.image_id = image_id
        super().__init__(f"Not authorized for image {image_id}.")


class ImageBadRequest(ImageError):
    nova_exception = "ImageBadRequest"
    code = 400

    def __init__(self, image_id: str, response: str) -> None:
        self.image_id = image_id
        super().__init__(f"Request of image {image_id} got BadRequest response: {response}")


class ImageServiceUnavailable(ImageError):
    """The image service did not answer after ``[glance] num_retries`` retries.

    Nova's servers API has no answer for this but its generic 500, which names the exception class.
    """

    nova_exception = "GlanceConnectionFailed"
    code = 500

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(
            f"Connection to glance host {server} failed: {reason}",
            "Unexpected API Error. Please contact the administrator\n<class 'nova.exception.GlanceConnectionFailed'>",
        )


class ImageListRefused(ImageError):
    """The image service refused a list (a bad filter or marker, a forbidden one): its status and words."""

    def __init__(self, status: int, text: str) -> None:
        self.status = status
        super().__init__(text)


class ImageDeleteConflict(ImageError):
    """The image service would not delete an image in its state (409)."""

    nova_exception = "ImageDeleteConflict"

    def __init__(self, text: str) -> None:
        super().__init__(f"Conflict deleting image. Reason: {text}.")
