"""The built-in cluster kept on disk, so that it outlives its process as a real cluster outlives the controller.

A directory (``[controller] emulator_state_dir``, ``$state_path/emulator`` by default) holds:

- ``snapshot.json``: every object (with status, uid, resourceVersion), the server-side apply field
  managers' last configurations, when each object entered its phase (wall-clock time), the console
  text of each launcher pod and the last pod address, as of one resource version. Written whole to
  ``snapshot.json.tmp``, flushed to disk (fsync), then renamed over the old one: a reader finds the
  old snapshot or the new one, never part of one.
- ``journal-<generation>.jsonl``: one JSON line per change after the snapshot of that generation,
  appended every ``FLUSH_EVERY`` seconds by a thread of its own (and fsynced every ``SYNC_EVERY``). An object's change is the JSON the
  store already made for its watches (nothing is encoded twice on the write path).
- ``lock``: held (flock) by the process using the directory; the kernel drops it when that process dies.

Every record says a value, not a difference (an object as it is, a console's whole text, ...): read
twice, a record gives the same state, so the records a new snapshot took may also open the next journal.

Reading back: the snapshot, then each journal of its generation or later, line by line. A process
killed in the middle of an append leaves a last line without its end: that line and anything after it
are left out (the cluster comes back as it was up to a fraction of a second before the kill). Resource
versions are reserved on disk a block ahead (``RESERVE_BLOCK``, written before any version of the block
is handed out), so that a cluster restarted after a kill never hands out a version again, even one
whose change was lost. Every read-back writes a fresh snapshot; the journal is folded into a new
snapshot once it outgrows ``COMPACT_AT`` (or twice the last snapshot) and when the cluster stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import math
import os
import pathlib
import re
import threading
import time
from typing import Any

import orjson

from openkeel_compute.emulator.resources import BY_KIND
from openkeel_compute.emulator.store import Key, Store

LOG = logging.getLogger(__name__)
FORMAT = 1
SNAPSHOT = "snapshot.json"
FLUSH_EVERY = 0.2  # seconds between two appends to the journal: at most this much is lost to a kill
# Seconds between two fsyncs of the journal: what a power loss may take (a kill takes only what was not
# appended: the kernel has the rest). Not every append: each fsync makes the disk write now, and the
# database of the same stack (SQLite, on the same disk) waits behind it at its own commits.
SYNC_EVERY = 5.0
RESERVE_BLOCK = 1000
COMPACT_AT = 32 << 20  # journal bytes that make a new snapshot (at least; else twice the last snapshot)
_JOURNAL = re.compile(r"journal-(\d+)\.jsonl")


class StateError(RuntimeError):
    """The state directory cannot be used: in use by another process, or not a state this code wrote."""


@dataclasses.dataclass
class State:
    """What a state directory holds, read back."""

    generation: int = 0  # the snapshot's (0: none)
    rv: int = 0  # the highest resource version taken (changes read, or reserved)
    objects: dict[Key, dict[str, Any]] = dataclasses.field(default_factory=dict)
    applied: dict[Key, dict[str, dict]] = dataclasses.field(default_factory=dict)
    since: dict[str, float] = dataclasses.field(default_factory=dict)  # uid -> time.time() of its phase
    consoles: dict[str, tuple[int, list[str]]] = dataclasses.field(default_factory=dict)  # pod uid -> boots, text
    ips: int = 0
    journals: list[int] = dataclasses.field(default_factory=list)  # generations found
    replayed: int = 0  # journal lines applied
    dropped: int = 0  # bytes of an unfinished write left out


def journal_path(directory: pathlib.Path, generation: int) -> pathlib.Path:
    return directory / f"journal-{generation:08d}.jsonl"


def _key(obj: dict[str, Any]) -> Key | None:
    res = BY_KIND.get(obj.get("kind", ""))
    if res is None:
        return None
    meta = obj["metadata"]
    return (res.plural, meta.get("namespace") if res.namespaced else None, meta["name"])


def read(directory: pathlib.Path) -> State:
    """The state kept in ``directory`` (empty when there is none)."""
    state = State()
    path = directory / SNAPSHOT
    if path.exists():
        try:
            data = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise StateError(f"{path} cannot be read ({exc}): move the directory away to start the built-in "
                             "cluster empty") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StateError(f"{path} is not a state of this version of the built-in cluster (format "
                             f"{data.get('format') if isinstance(data, dict) else None!r}, expected {FORMAT})")
        state.generation, state.rv, state.ips = data["generation"], max(data["rv"], data["reserved"]), data["ips"]
        for obj in data["objects"]:
            key = _key(obj)
            if key is not None:
                state.objects[key] = obj
        state.applied = {(plural, ns, name): managers for plural, ns, name, managers in data["applied"]}
        state.since = data["since"]
        state.consoles = {uid: (boots, lines) for uid, (boots, lines) in data["consoles"].items()}
    state.journals = sorted(int(m.group(1)) for p in directory.glob("journal-*.jsonl")
                            if (m := _JOURNAL.fullmatch(p.name)))
    broken = False
    for generation in state.journals:
        if generation < state.generation:
            continue  # folded into the snapshot already
        for line in journal_path(directory, generation).read_bytes().splitlines(keepends=True):
            record = None
            if line.endswith(b"\n"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    record = orjson.loads(line)
            if not isinstance(record, dict):
                broken = True
            if broken:  # an unfinished write: what follows it cannot be applied on top of a hole
                state.dropped += len(line)
                if isinstance(record, dict) and "reserve" in record:
                    state.rv = max(state.rv, record["reserve"])  # versions handed out stay taken
                continue
            _apply(state, record)
            state.replayed += 1
    return state


def _apply(state: State, record: dict[str, Any]) -> None:
    if "object" in record:
        obj = record["object"]
        key = _key(obj)
        state.rv = max(state.rv, record["rv"])
        if key is None:
            return
        if record["type"] == "DELETED":
            state.objects.pop(key, None)
            state.applied.pop(key, None)
        else:
            state.objects[key] = obj
    elif "since" in record:
        if record["at"] is None:  # nothing under way any more
            state.since.pop(record["since"], None)
        else:
            state.since[record["since"]] = record["at"]
    elif "applied" in record:
        state.applied.setdefault(tuple(record["applied"]), {})[record["manager"]] = record["config"]
    elif "unapplied" in record:
        state.applied.pop(tuple(record["unapplied"]), None)
    elif "console" in record:  # the pod's whole console text so far
        state.consoles[record["console"]] = (record["boot"], record["lines"])
    elif "ips" in record:
        state.ips = max(state.ips, record["ips"])
    elif "reserve" in record:
        state.rv = max(state.rv, record["reserve"])


def _owner_uid(key: str) -> str:
    """The uid a ``since`` key belongs to: an object's uid, or "<uid>/<step>" for a step under way on it."""
    return key.split("/", 1)[0]


def _encode(records: list[tuple], offset: float) -> bytes:
    """Journal lines; ``offset`` turns the lifecycle's monotonic clock into wall-clock time."""
    parts = []
    for record in records:
        tag = record[0]
        if type(tag) is int:  # a change, as the store serialised it for its watches
            parts.append(b'{"rv":%d,"type":"%s","object":%s}\n' % (tag, record[1].encode(), record[4]))
            continue
        if tag == "since":
            line: dict[str, Any] = {"since": record[1], "at": None if record[2] is None else record[2] + offset}
        elif tag == "applied":
            line = {"applied": list(record[1]), "manager": record[2], "config": record[3]}
        elif tag == "unapplied":
            line = {"unapplied": list(record[1])}
        elif tag == "console":
            line = {"console": record[1], "boot": record[2], "lines": record[3]}
        else:
            line = {tag: record[1]}
        parts.append(orjson.dumps(line) + b"\n")
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Persistence:
    """Keeps one emulated cluster (its store and its controllers' state) in a directory."""

    def __init__(self, directory: str | os.PathLike, store: Store, lifecycle: Any) -> None:
        self.directory = pathlib.Path(directory)
        self.store = store
        self.lifecycle = lifecycle
        self.generation = 0
        self.fd: int | None = None
        self.journal_bytes = 0
        self.snapshot_bytes = 0
        self._lock_fd: int | None = None
        self._io = threading.Lock()  # one append (and its taking back) at a time
        self._ceiling = 0  # the last resource version reserved on disk
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False  # a write failed (a full disk): said once, retried every pass
        self._compact_after = 0.0  # monotonic time before which a failed compaction is not tried again
        # what keeping the cluster cost (bench/emulator_boot.py prints it): bytes appended, snapshots
        # written, CPU seconds of the journal thread
        self.written = self.snapshots = 0
        self.thread_cpu = 0.0
        self._synced = time.monotonic()

    # -- start and stop ------------------------------------------------------------------------------

    def open(self) -> State:
        """Take the directory, read back what it holds into the store and the controllers, write a fresh
        snapshot and start a journal. Raises StateError when another process uses the directory."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise StateError(f"the built-in cluster's state in {self.directory} is in use by another process "
                             "(another controller on the same state path)") from None
        try:
            state = read(self.directory)
        except Exception:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise
        if state.dropped:
            LOG.warning("built-in cluster: the last %d bytes of its journal in %s were an unfinished write (the "
                        "process was killed) and are left out", state.dropped, self.directory)
        if state.objects:
            self.store.restore(state.objects, state.applied, state.rv)
            uids = self.store.objects.uids
            self.lifecycle.restore({key: at for key, at in state.since.items() if _owner_uid(key) in uids}, state.ips,
                                   {uid: c for uid, c in state.consoles.items() if uid in uids})
        self.generation = max([state.generation, *state.journals])
        with self.store.lock:
            self.store.pending = []
            self.store.reserved = self.store.rv  # the next write reserves a block first
            self.store.reserve = self._reserve
        self.compact()  # what was read is one snapshot now; the journals it came from go
        return state

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="emulator-journal", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the journal thread, fold everything into a last snapshot and let the directory go."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.fd is not None:
            self.compact(final=True)
        with self.store.lock:
            self.store.pending, self.store.reserve, self.store.reserved = None, None, math.inf
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_EVERY):
            started = time.thread_time()
            try:
                self.flush()
                if self.journal_bytes > max(COMPACT_AT, 2 * self.snapshot_bytes) \
                        and time.monotonic() >= self._compact_after:
                    self.compact()
                if self._failing:
                    LOG.info("built-in cluster: its state is written to %s again", self.directory)
                    self._failing = False
            except OSError as exc:  # a full disk: the cluster goes on in memory, what is not written waits
                self._compact_after = time.monotonic() + 30
                if not self._failing:
                    LOG.error("built-in cluster: cannot write its state in %s (%s); it goes on in memory and "
                              "tries again", self.directory, exc)
                    self._failing = True
            self.thread_cpu += time.thread_time() - started

    # -- writing -------------------------------------------------------------------------------------

    def _reserve(self, rv: int) -> int:
        """Called under the store's lock when ``rv`` is past the reserved versions: reserve the next block
        (given to the kernel before any version of it is handed out; if that fails, so does the write that
        asked). One small write to the file opened for appending: it lands whole after whatever is there,
        without waiting for an append of the journal thread (the store stays locked meanwhile)."""
        self._ceiling = ceiling = rv + RESERVE_BLOCK - 1
        _write_all(self.fd, b'{"reserve":%d}\n' % ceiling)
        return ceiling

    def _append(self, fd: int, records: list[tuple], data: bytes | None = None) -> None:
        """Append whole lines, or nothing: a write that fails is taken back (a full disk must not leave a
        line without its end in the middle of the journal) and its records go back to wait for the next."""
        if data is None:
            data = _encode(records, time.time() - time.monotonic())
        failure = None
        with self._io:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
            except OSError as exc:
                failure = exc
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                    # a reservation written meanwhile went with what was taken back: write it again (one
                    # small write: whole, or nothing, or taken back)
                    line = b'{"reserve":%d}\n' % self._ceiling
                    if os.write(fd, line) != len(line):
                        os.ftruncate(fd, size)
        if failure is not None:
            if records:
                with self.store.lock:  # not while holding _io: a reservation holds the store's lock, then _io
                    if self.store.pending is not None:
                        self.store.pending[:0] = records
            raise failure
        self.journal_bytes += len(data)
        self.written += len(data)

    def flush(self) -> None:
        """Append the records kept since the last flush, and have them on disk (from the journal thread)."""
        with self.store.lock:
            records, self.store.pending = self.store.pending, []
        if records:
            self._append(self.fd, records)
        if time.monotonic() - self._synced >= SYNC_EVERY:
            os.fsync(self.fd)
            self._synced = time.monotonic()

    def compact(self, final: bool = False) -> None:
        """A new snapshot of everything, taken at one resource version; later changes go to a new journal.
        ``final``: nothing is written after it (no new journal; no version reserved beyond the last)."""
        store, lifecycle = self.store, self.lifecycle
        launchers = lifecycle.launchers
        with store.lock:
            records, store.pending = store.pending, ([] if not final else None)
            uids = store.objects.uids
            objects = list(store.objects.values())
            applied = [[*key, dict(managers)] for key, managers in store.applied.items()]
            since = {key: at for key, at in lifecycle.since.items() if _owner_uid(key) in uids}
            consoles = {uid: [launchers.boots.get(uid, 0), list(lines)] for uid, lines in launchers.consoles.items()
                        if uid in uids}
            rv, ips = store.rv, lifecycle.ips
            reserved = rv if final else store.reserved
            old_fd, self.generation = self.fd, self.generation + 1
            if final:
                self.fd, store.reserve, store.reserved = None, None, math.inf
            else:
                self.fd = os.open(journal_path(self.directory, self.generation),
                                  os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        offset = time.time() - time.monotonic()
        try:
            # The records up to the cut open the new journal: should the snapshot not make it to disk, the
            # old snapshot and both journals still say everything (read again on top of the new
            # snapshot, they change nothing).
            if records and not final:
                self._append(self.fd, records)
            elif records:
                self._append(old_fd, records)
        finally:
            if old_fd is not None and old_fd != self.fd:
                with self._io:
                    os.close(old_fd)
        data = orjson.dumps({"format": FORMAT, "generation": self.generation, "rv": rv, "reserved": reserved,
                             "saved": time.time(), "ips": ips, "objects": objects, "applied": applied,
                             "since": {uid: at + offset for uid, at in since.items()}, "consoles": consoles})
        tmp = self.directory / (SNAPSHOT + ".tmp")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.directory / SNAPSHOT)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        for path in self.directory.glob("journal-*.jsonl"):
            match = _JOURNAL.fullmatch(path.name)
            if match and int(match.group(1)) < self.generation:
                path.unlink(missing_ok=True)
        self.journal_bytes, self.snapshot_bytes = 0, len(data)
        self.snapshots += 1
        LOG.debug("built-in cluster: snapshot of %d objects at resource version %d (%d bytes)", len(objects), rv,
                  len(data))
