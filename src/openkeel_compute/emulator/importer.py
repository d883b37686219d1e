"""CDI's importer pods: each reads its DataVolume's HTTP source, as a real cluster does before a disk is ready.

A DataVolume's ``spec.source.http`` names the image (``url``) and how to ask for it: ``extraHeaders``,
``secretExtraHeaders`` (Secrets whose values are header lines, ``Name:value``; OpenKeel's image token),
``secretRef`` (a Secret with ``accessKeyId`` and ``secretKey``, sent as basic credentials) and
``certConfigMap`` (a ConfigMap of CA certificates the server's certificate is checked against). The importer
GETs the URL once per attempt and reads the bytes to their end, discarding them (the built-in cluster keeps
no disk contents): an image deleted from the image service, a bad URL or an image service that does not
answer fails the attempt with the message CDI's importer ends with, and CDI restarts the pod (lifecycle.py).

The reads run on a few threads of their own, never on the API server's request threads nor under the
store's lock; each socket operation is bounded by ``timeout`` seconds, a whole read by ``deadline``.
"""

from __future__ import annotations

import base64
import concurrent.futures
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

#: what CDI's importer prefixes to a source it cannot read (its termination message)
CONNECT_PREFIX = "Unable to connect to http data source"
CHUNK = 1 << 16


class Importer:
    """The outcome of each DataVolume's current import attempt, by the DataVolume's uid.

    ``enabled`` False: every source reads as good at once (``[controller] emulator_read_images = false``, or
    tests whose image URLs are never served).
    """

    def __init__(self, enabled: bool = True, timeout: float = 10.0, deadline: float = 600.0,
                 workers: int = 4) -> None:
        self.enabled = enabled
        self.timeout, self.deadline, self.workers = timeout, deadline, workers
        self._outcomes: dict[str, str | None] = {}  # uid -> None (read to the end) or the failure's message
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def outcome(self, uid: str, read: Any) -> tuple[bool, str | None]:
        """(done, message) of the attempt under way for ``uid``: (False, None) while it reads, (True, None)
        once the source was read to its end, (True, message) when it failed. ``read``: a callable giving
        (url, headers, CA certificates or None) for a new attempt, called only when none is under way."""
        if not self.enabled:
            return True, None
        with self._lock:
            if uid in self._outcomes:
                return True, self._outcomes[uid]
            if uid in self._running:
                return False, None
            self._running.add(uid)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="cdi-importer")
            pool = self._pool
        try:
            url, headers, cadata = read()
        except Exception as exc:  # noqa: BLE001 - a source that cannot even be described fails the attempt
            self._done(uid, f"{CONNECT_PREFIX}: {exc}")
            return True, self._outcomes.get(uid)
        pool.submit(self._read, uid, url, headers, cadata)
        return False, None

    def forget(self, uid: str) -> None:
        """The attempt's outcome was used (the import succeeded, or its pod is restarted for a new attempt)."""
        with self._lock:
            self._outcomes.pop(uid, None)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _done(self, uid: str, message: str | None) -> None:
        with self._lock:
            self._running.discard(uid)
            self._outcomes[uid] = message

    def _read(self, uid: str, url: str, headers: dict[str, str], cadata: str | None) -> None:
        try:
            message = read_source(url, headers, cadata, self.timeout, self.deadline)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong fails this attempt, not the cluster
            message = f"{CONNECT_PREFIX}: {exc}"
        self._done(uid, message)


def read_source(url: str, headers: dict[str, str], cadata: str | None, timeout: float, deadline: float
                ) -> str | None:
    """GET ``url`` and read its bytes to the end; None when that worked, else CDI's importer's message."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f'{CONNECT_PREFIX}: unable to parse endpoint "{url}"'
    context = None
    if parts.scheme == "https":
        context = ssl.create_default_context(cadata=cadata) if cadata else ssl.create_default_context()
    request = urllib.request.Request(url, headers=headers, method="GET")
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                         urllib.request.ProxyHandler({}))
    try:
        response = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        return (f"{CONNECT_PREFIX}: expected status code 200, got {exc.code}. "
                f"Status: {exc.code} {exc.reason}")
    except (urllib.error.URLError, OSError) as exc:
        return f'{CONNECT_PREFIX}: HTTP request errored: Get "{url}": {_network_error(exc, parts)}'
    with response:
        if response.status != 200:
            return (f"{CONNECT_PREFIX}: expected status code 200, got {response.status}. "
                    f"Status: {response.status} {response.reason}")
        ends = time.monotonic() + deadline
        try:
            while response.read(CHUNK):
                if time.monotonic() > ends:
                    return "Unable to process data: context deadline exceeded"
        except (OSError, ValueError) as exc:
            return f"Unable to process data: {_network_error(exc, parts)}"
    return None


def _network_error(exc: BaseException, parts: urllib.parse.SplitResult) -> str:
    """A failed connection worded as the importer (a Go program) words it."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    address = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if isinstance(reason, socket.gaierror):
        return f"dial tcp: lookup {parts.hostname}: no such host"
    if isinstance(reason, ConnectionRefusedError):
        return f"dial tcp {address}: connect: connection refused"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"tls: failed to verify certificate: {reason.verify_message}"
    if isinstance(reason, (ConnectionResetError, BrokenPipeError)):
        return "unexpected EOF"
    return str(reason)


def source_of(dv: dict[str, Any], lookup: Any) -> tuple[str, dict[str, str], str | None]:
    """(url, headers, CA certificates) of a DataVolume's HTTP source; ``lookup(kind, name, namespace)`` reads
    the Secrets and the ConfigMap it names (their absence keeps the importer pod from starting, see
    lifecycle.py, so they are there by now)."""
    http = ((dv.get("spec") or {}).get("source") or {}).get("http") or {}
    ns = dv["metadata"].get("namespace")
    headers: dict[str, str] = {}
    lines = list(http.get("extraHeaders") or ())
    for name in http.get("secretExtraHeaders") or ():
        secret = lookup("Secret", name, ns) or {}
        lines += [base64.b64decode(v).decode(errors="replace") for v in (secret.get("data") or {}).values()]
        lines += list((secret.get("stringData") or {}).values())
    for line in lines:
        key, sep, value = str(line).partition(":")
        if sep and key.strip():
            headers[key.strip()] = value.strip()
    if http.get("secretRef"):
        data = (lookup("Secret", http["secretRef"], ns) or {}).get("data") or {}
        user = base64.b64decode(data.get("accessKeyId", "")).decode(errors="replace")
        password = base64.b64decode(data.get("secretKey", "")).decode(errors="replace")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    cadata = None
    if http.get("certConfigMap"):
        config = (lookup("ConfigMap", http["certConfigMap"], ns) or {}).get("data") or {}
        cadata = "\n".join(str(v) for v in config.values()) or None
    return str(http.get("url") or ""), headers, cadata
