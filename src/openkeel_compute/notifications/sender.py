"""The background sender: notifications leave the process from one thread, never from a request.

A request that commits a change hands its notification to the process's ``BackgroundSender``
and answers at once. The sender's thread publishes the notifications in the order they were
handed over, through oslo.messaging's notification transport. While the broker is away it keeps
the oldest notification at the head of its queue and tries it again (with a growing pause, at
most ``RETRY_PAUSE_MAX`` seconds), so what was queued goes out in order when the broker is back.

Nothing waits without bound:

- the queue holds at most ``[notifications] send_queue_size`` notifications; one handed over
  while it is full is dropped;
- a notification that has waited ``[notifications] send_max_wait`` seconds for the broker is
  dropped;
- a clean shutdown (``close``) sends what it can within its flush time and drops the rest.

Every dropped notification is counted (``stats()``; /healthcheck's details show the figures of
the process that answers it). The log gets one warning when sending starts to fail, one when
the queue first fills, and one line when sending works again, with what the outage cost; never a
line per notification.

Delivery is confirmed by the transport itself (its ``_send_notification``, what oslo.messaging's
``messaging``/``messagingv2`` drivers call): oslo.messaging's ``Notifier`` logs and swallows a
failed send, so through it a notification sent into a closed port would count as delivered.
Other drivers (``log``, ``routing``, ``test``) go through a ``Notifier`` of their own, from the
same thread.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import datetime as dt
import logging
import os
import threading
import time
import uuid
import weakref
from typing import Any

LOG = logging.getLogger(__name__)

# oslo.messaging's notification drivers that publish on the transport, with their message version.
TRANSPORT_DRIVERS = {"messaging": 1.0, "messagingv2": 2.0}
RETRY_PAUSE_MIN = 0.2
RETRY_PAUSE_MAX = 5.0

_SENDERS: weakref.WeakSet[BackgroundSender] = weakref.WeakSet()


@dataclasses.dataclass
class _Pending:
    event_type: str
    priority: str
    context: Any  # the request context's redacted copy (or {}), for the drivers off the transport
    wire_context: dict  # the same as sent on the transport
    message: dict
    topics: list[str]  # topics still to publish on (a partly sent notification resumes where it failed)
    queued_at: float
    others_done: bool = False  # handed to the drivers that do not publish on the transport


@dataclasses.dataclass
class Stats:
    queued: int = 0  # waiting in the queue now
    delivered: int = 0
    dropped: int = 0
    dropped_full: int = 0  # of ``dropped``: handed over while the queue was full
    dropped_expired: int = 0  # of ``dropped``: waited longer than send_max_wait (or past the shutdown flush)
    failing_for: float | None = None  # seconds since sending started to fail; None while it works

    def line(self) -> str:
        failing = "" if self.failing_for is None else f", broker unreachable for {self.failing_for:.0f} s"
        return (f"notifications: delivered={self.delivered} queued={self.queued} dropped={self.dropped} "
                f"(queue full {self.dropped_full}, waited too long {self.dropped_expired}){failing}")


class BackgroundSender:
    """One thread per process publishing notifications in order; bounded, counted, never blocking."""

    def __init__(self, transport: Any, *, transport_topics: list[str], other_notifiers: list | None = None,
                 transport_version: float = 2.0, retry: int | None = None, queue_size: int = 10000,
                 max_wait: float = 300.0, flush_seconds: float = 10.0) -> None:
        self._transport = transport
        self._transport_topics = list(transport_topics)
        self._transport_version = transport_version
        self._others = list(other_notifiers or ())
        self._retry = retry
        self.queue_size = max(1, int(queue_size))
        self.max_wait = float(max_wait)
        self.flush_seconds = float(flush_seconds)
        self._reset()
        _SENDERS.add(self)

    def _reset(self) -> None:
        """Fresh state for this process (also after a fork: the parent's thread does not exist here)."""
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._queue: collections.deque[_Pending] = collections.deque()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = False
        self._flush_deadline: float | None = None
        self._stats = Stats()
        self._failing_since: float | None = None
        self._dropped_at_failure = 0
        self._full_logged = False
        self.attempting = False  # a publish is in progress on the thread (tests read it)

    # -- the request side -------------------------------------------------------------------------

    def submit(self, context: Any, wire_context: dict, event_type: str, payload: Any, *, publisher_id: str,
               priority: str = "INFO") -> bool:
        """Queue one notification; returns at once. False when it was dropped (queue full, closing)."""
        if self._pid != os.getpid():
            self._reset()
        message = {"message_id": str(uuid.uuid4()), "publisher_id": publisher_id, "event_type": event_type,
                   "priority": priority, "payload": payload,
                   "timestamp": dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(" ")}
        topics = [f"{topic}.{priority.lower()}" for topic in self._transport_topics]
        item = _Pending(event_type, priority, context, wire_context, message, topics, time.monotonic())
        with self._cond:
            if self._closing:
                self._drop(expired=True)
                return False
            if len(self._queue) >= self.queue_size:
                self._drop(expired=False)
                if not self._full_logged:
                    self._full_logged = True
                    LOG.warning("The notification queue is full (%d waiting): notifications are dropped and "
                                "counted until it drains.", len(self._queue))
                return False
            self._queue.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="notification-sender", daemon=True)
                self._thread.start()
                _flush_at_exit()
            self._cond.notify()
        return True

    def stats(self) -> Stats:
        with self._cond:
            figures = dataclasses.replace(self._stats, queued=len(self._queue))
            if self._failing_since is not None:
                figures.failing_for = time.monotonic() - self._failing_since
            return figures

    def drain(self, timeout: float) -> bool:
        """Wait until nothing is queued or being published (at most ``timeout`` s); True when idle."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self.attempting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.1))
            return True

    def close(self, flush_seconds: float | None = None) -> Stats:
        """Stop taking notifications, send the queued ones for up to ``flush_seconds``, drop the rest."""
        flush = self.flush_seconds if flush_seconds is None else flush_seconds
        with self._cond:
            if self._closed or self._pid != os.getpid():
                return dataclasses.replace(self._stats, queued=len(self._queue))
            self._closing = True
            self._flush_deadline = time.monotonic() + flush
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(flush + 1.0)  # a publish already under way may overrun the deadline a little
        with self._cond:
            self._closed = True
            left = len(self._queue)
            while self._queue:  # the thread is stuck in a publish: what it did not send is lost
                self._queue.popleft()
                self._drop(expired=True)
            figures = dataclasses.replace(self._stats, queued=0)
        if left or figures.dropped:
            LOG.warning("Notification sender stopped: %s", figures.line())
        return figures

    # -- the thread ---------------------------------------------------------------------------------

    def _drop(self, *, expired: bool) -> None:  # under the lock
        self._stats.dropped += 1
        if expired:
            self._stats.dropped_expired += 1
        else:
            self._stats.dropped_full += 1

    def _publish(self, item: _Pending) -> None:
        """Send ``item`` on its remaining topics; raises when the transport could not."""
        import oslo_messaging

        while item.topics:
            target = oslo_messaging.Target(topic=item.topics[0])
            self._transport._send_notification(target, item.wire_context, item.message,
                                               version=self._transport_version, retry=self._retry)
            item.topics.pop(0)
        if not item.others_done:
            item.others_done = True
            for notifier in self._others:
                try:
                    if notifier.publisher_id != item.message["publisher_id"]:  # a server event's own
                        notifier = notifier.prepare(publisher_id=item.message["publisher_id"])
                    send = getattr(notifier, item.priority.lower(), notifier.info)
                    send(item.context, item.event_type, item.message["payload"])
                except Exception:  # a log or test driver failing must not hold the queue
                    LOG.exception("Could not hand the %s notification to a notification driver", item.event_type)

    def _run(self) -> None:
        pause = RETRY_PAUSE_MIN
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                item = self._queue[0]
                self.attempting = True
            error: Exception | None = None
            try:
                self._publish(item)
            except Exception as exc:  # noqa: BLE001 - broker away, refused, timed out: all retried the same way
                error = exc
            with self._cond:
                self.attempting = False
                now = time.monotonic()
                if error is None:
                    if self._queue and self._queue[0] is item:
                        self._queue.popleft()
                    else:  # close() gave up on it while it was going out: it went out after all
                        self._stats.dropped -= 1
                        self._stats.dropped_expired -= 1
                    self._stats.delivered += 1
                    self._cond.notify_all()
                    pause = RETRY_PAUSE_MIN
                    if self._failing_since is not None:
                        LOG.warning("Notifications are sent again after %.0f s; %d dropped meanwhile, %d waiting.",
                                    now - self._failing_since, self._stats.dropped - self._dropped_at_failure,
                                    len(self._queue))
                        self._failing_since = None
                    if self._full_logged and len(self._queue) < self.queue_size // 2:
                        self._full_logged = False
                    continue
                if self._failing_since is None:
                    self._failing_since = now
                    self._dropped_at_failure = self._stats.dropped
                    LOG.warning("Cannot send notifications (%s: %s); they wait in the queue (at most %d, for at "
                                "most %.0f s each) and go out in order when the broker answers.",
                                type(error).__name__, error, self.queue_size, self.max_wait)
                # Drop what waited too long (on shutdown: everything once the flush time is over).
                limit = now - self.max_wait
                flush_over = self._closing and self._flush_deadline is not None and now >= self._flush_deadline
                while self._queue and (flush_over or self._queue[0].queued_at <= limit):
                    self._queue.popleft()
                    self._drop(expired=True)
                if not self._queue:
                    continue
                # Pause before the next try; new notifications do not cut it short, a shutdown does.
                resume = now + pause
                while True:
                    until = resume
                    if self._closing and self._flush_deadline is not None:
                        until = min(until, self._flush_deadline)
                    remaining = until - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                pause = min(pause * 2, RETRY_PAUSE_MAX)


_AT_EXIT: set[int] = set()


def _flush_at_exit() -> None:
    """Flush at interpreter exit too (servers other than ``openkeel-compute serve``, e.g. gunicorn's
    workers); a process that ends with ``os._exit`` is flushed by serving.py instead."""
    if os.getpid() not in _AT_EXIT:
        _AT_EXIT.add(os.getpid())
        atexit.register(close_all)


def senders_stats() -> list[Stats]:
    """The figures of this process's senders (for /healthcheck)."""
    return [sender.stats() for sender in list(_SENDERS) if sender._pid == os.getpid() and not sender._closed]


def drain_all(timeout: float = 30.0) -> bool:
    """Wait until every sender of this process is idle (tests read what was sent after it)."""
    deadline = time.monotonic() + timeout
    return all(sender.drain(max(0.0, deadline - time.monotonic()))
               for sender in list(_SENDERS) if sender._pid == os.getpid())


def close_all(flush_seconds: float | None = None) -> None:
    """Flush and stop every sender of this process (a worker's clean shutdown)."""
    for sender in list(_SENDERS):
        if sender._pid == os.getpid():
            sender.close(flush_seconds)
