"""Rendered pages of a collection, reused while the collection's generation stays the same.

A list of 1,000 flavors costs tens of milliseconds to read and render and one primary-key read to
recognise as unchanged. Every transaction that changes the collection raises its generation row
before it commits (db/models.py GENERATIONS), so the rule is exact across threads, workers and
replicas: a page is served only to a request that read the generation it was rendered at, and it
is kept only when the generation read before and after rendering it was the same (so the rows
came from one committed state, even where a read of several statements sees each its own).

Per process, least recently used first out, bounded in bytes: the key is everything the page
depends on besides the rows (the caller's visibility, the microversion, the URL with its query).
"""

from __future__ import annotations

import collections
import threading

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class PageCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._pages: collections.OrderedDict[tuple, tuple[object, bytes]] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple, generation: object | None) -> bytes | None:
        """The page for ``key`` rendered at ``generation``, or None."""
        if generation is None:
            return None
        with self._lock:
            entry = self._pages.get(key)
            if entry is None or entry[0] != generation:
                return None
            self._pages.move_to_end(key)
            return entry[1]

    def put(self, key: tuple, generation: object | None, page: bytes) -> None:
        if generation is None or len(page) > self.max_bytes:
            return
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._pages[key] = (generation, page)
            self._bytes += len(page)
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._pages.popitem(last=False)
                self._bytes -= len(dropped)

    def __len__(self) -> int:
        return len(self._pages)
