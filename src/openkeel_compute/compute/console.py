"""A server's console output: the API's request, the controller's answer, and Nova's rules for the text.

The API never reads the cluster. It records a request in the server's ``console_logs`` row
(``requested_at``, ``length``; the previous answer cleared) with an outbox row that wakes the controller,
then polls the row until the controller answered (``answered_at`` >= its ``requested_at``). The
controller reads the guest's console log (the launcher pod's ``guest-console-log`` container), keeps what
Nova's compute service would return for that length (``tail``, ``as_text``) and writes it with a
compare-and-swap on the request it read, so an answer never lands on a newer request it does not fit.
The API removes the control characters Nova's API removes (``printable``). The row goes with the server.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import AnyStr

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from openkeel_compute.compute.errors import InstanceNotFound, NotFound
from openkeel_compute.db.models import CONSOLE_LOGS, utcnow

C = CONSOLE_LOGS.c
#: What Nova's libvirt driver reads of a console log: its last 100 KiB.
MAX_CONSOLE_BYTES = 100 * 1024
#: The ``error`` of an answer when the guest has no console log (its pod has no guest-console-log container).
NOT_AVAILABLE = "console-not-available"
_LENGTH_BOUND = 2**31 - 1  # a longer tail than any log has lines: the same text, and it fits the column
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f]")


class ConsoleNotAvailable(NotFound):
    def __init__(self):
        super().__init__("Guest does not have a console available.")


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    instance_uuid: str
    requested_at: dt.datetime
    length: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    length: int | None
    output: str | None
    error: str | None


def normal_length(length: int | str | None) -> int | None:
    """The request's ``length`` (an integer, or a string of digits the schema let through) as a number the
    column holds; beyond the bounds the tail is the same (the whole log, or nothing)."""
    if length is None:
        return None
    return max(-_LENGTH_BOUND, min(_LENGTH_BOUND, int(length)))


def tail(data: AnyStr, length: int | None) -> AnyStr:
    """Nova's compute service's cut: the last ``length`` pieces between newlines (a log ending with a
    newline gives length - 1 lines and the empty piece after the last one); 0 gives nothing, and a
    negative length leaves out that many pieces from the start instead. None: all of it."""
    if length is None:
        return data
    newline = b"\n" if isinstance(data, bytes) else "\n"
    if length == 0:
        return data[:0]
    return newline.join(data.split(newline)[-length:])


def as_text(data: bytes) -> str:
    """The bytes as Nova's compute service returns them: ASCII, each other byte a replacement character."""
    return data.decode("ascii", "replace")


def printable(text: str) -> str:
    """Without the control characters Nova's API removes (tab and newline stay)."""
    return _CONTROL.sub("", text)


def covers(answered: int | None, wanted: int | None) -> bool:
    """Whether an answer read for length ``answered`` holds the one for ``wanted`` (after ``tail``)."""
    if answered == wanted or wanted == 0:
        return True
    if answered is None:
        return True
    return wanted is not None and wanted > 0 and answered > 0 and answered >= wanted


def cut(answer: Answer, wanted: int | None) -> str:
    """The output for ``wanted`` from an answer that ``covers`` it."""
    output = answer.output or ""
    return output if answer.length == wanted else tail(output, wanted)


# -- the row ------------------------------------------------------------------------------------------

def request(conn: Connection, instance_uuid: str, length: int | None) -> Request:
    """Ask for the console output (the previous answer is cleared); returns the request as written."""
    now = utcnow()
    values = {"requested_at": now, "length": length, "answered_at": None, "output": None, "error": None}
    if conn.execute(update(CONSOLE_LOGS).where(C.instance_uuid == instance_uuid).values(values)).rowcount == 0:
        try:
            with conn.begin_nested():
                conn.execute(insert(CONSOLE_LOGS).values(instance_uuid=instance_uuid, **values))
        except IntegrityError:  # another request inserted it first: ours replaces it
            conn.execute(update(CONSOLE_LOGS).where(C.instance_uuid == instance_uuid).values(values))
    written = conn.execute(select(C.requested_at).where(C.instance_uuid == instance_uuid)).scalar_one()
    return Request(instance_uuid, written, length)


def pending(conn: Connection, instance_uuid: str) -> Request | None:
    """The request the controller has to answer, or None (answered already, or none)."""
    row = conn.execute(select(C.requested_at, C.length, C.answered_at)
                       .where(C.instance_uuid == instance_uuid)).one_or_none()
    if row is None or row.requested_at is None or row.answered_at is not None:
        return None
    return Request(instance_uuid, row.requested_at, row.length)


def answer(conn: Connection, req: Request, *, output: str | None = None, error: str | None = None) -> bool:
    """The controller's answer to ``req``; False when a newer request replaced it meanwhile."""
    same_length = C.length.is_(None) if req.length is None else C.length == req.length
    result = conn.execute(
        update(CONSOLE_LOGS)
        .where(C.instance_uuid == req.instance_uuid, C.requested_at == req.requested_at, same_length,
               C.answered_at.is_(None))
        .values(answered_at=max(utcnow(), req.requested_at), output=output, error=error))
    return result.rowcount == 1


def answered(conn: Connection, req: Request) -> Answer | None:
    """The answer to ``req`` or to a later request, once there is one. InstanceNotFound when the server
    was deleted meanwhile (its row went with it), as Nova's compute service answers then."""
    row = conn.execute(select(C.length, C.answered_at, C.output, C.error)
                       .where(C.instance_uuid == req.instance_uuid)).one_or_none()
    if row is None:
        raise InstanceNotFound(req.instance_uuid)
    if row.answered_at is None or row.answered_at < req.requested_at:
        return None
    return Answer(row.length, row.output, row.error)


def forget(conn: Connection, instance_uuid: str) -> None:
    """The server is gone: so is its console row."""
    conn.execute(delete(CONSOLE_LOGS).where(C.instance_uuid == instance_uuid))
