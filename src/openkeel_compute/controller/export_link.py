"""The bytes of a VirtualMachineExport's link, as a stream (what virtctl vmexport download reads).

A link is ``status.links.internal`` (inside the cluster: the controller runs there) or ``external``; each
volume has its formats' URLs. The export server wants the token of the export's Secret in the
``x-kubevirt-export-token`` header and presents a certificate the link's ``cert`` (PEM) signs. Not retried:
the consumer (an image upload) cannot take the same bytes twice; the step starts the download again.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2

TOKEN_HEADER = "x-kubevirt-export-token"
_CHUNK = 1 << 20


def raw_url(export: dict[str, Any], volume: str) -> tuple[str, str] | None:
    """(the ``raw`` format's URL of ``volume``, the link's CA) from the export's status, None until it has it."""
    links = ((export.get("status") or {}).get("links") or {})
    for kind in ("internal", "external"):
        link = links.get(kind) or {}
        for vol in link.get("volumes") or ():
            if vol.get("name") == volume:
                for fmt in vol.get("formats") or ():
                    if fmt.get("format") == "raw" and fmt.get("url"):
                        return fmt["url"], link.get("cert") or ""
    return None


@contextmanager
def download(url: str, token: str, cert: str = "", timeout: float = 30.0) -> Iterator[Iterator[bytes]]:
    """The link's body in chunks; raises httpx2.HTTPError on a refused or broken download."""
    verify: Any = True
    if url.startswith("https://") and cert:
        verify = ssl.create_default_context(cadata=cert)
    with httpx2.Client(verify=verify, timeout=timeout, trust_env=False) as client, \
            client.stream("GET", url, headers={TOKEN_HEADER: token}) as response:
        response.raise_for_status()
        yield response.iter_bytes(_CHUNK)
