"""A WSGI-level test client that keeps repeated headers (Nova sends two Vary lines)."""

from __future__ import annotations

import io
import json
from urllib.parse import urlsplit


class Result:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes):
        self.status = status
        self.status_code = int(status.split(" ", 1)[0])
        self.header_list = headers
        self.content = body

    def header(self, name: str) -> str | None:
        values = self.headers_named(name)
        return values[-1] if values else None

    def headers_named(self, name: str) -> list[str]:
        return [v for k, v in self.header_list if k.lower() == name.lower()]

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")

    @property
    def json(self):
        return json.loads(self.content)


class Client:
    def __init__(self, app, host: str = "127.0.0.1:18774"):
        self.app = app
        self.host = host

    def request(self, method: str, path: str, *, headers: dict | None = None, body=None, json_body=None,
                query: str = "", extra_environ: dict | None = None, chunked: bool = False) -> Result:
        if "?" in path and not query:
            path, query = path.split("?", 1)
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers = dict(headers or {})
            headers.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        body = body or b""
        host, _, port = self.host.partition(":")
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": host,
            "SERVER_PORT": port or "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": self.host,
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": io.StringIO(),
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            **(extra_environ or {}),
        }
        if chunked:  # the server took the chunked framing off: no length, the input ends where the body does
            environ["HTTP_TRANSFER_ENCODING"] = "chunked"
            environ["wsgi.input_terminated"] = True
        elif body or method in ("POST", "PUT", "PATCH"):
            environ["CONTENT_LENGTH"] = str(len(body))
        for name, value in (headers or {}).items():
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                environ["CONTENT_TYPE"] = value
            elif key == "CONTENT_LENGTH":
                environ["CONTENT_LENGTH"] = value
            else:
                environ["HTTP_" + key] = value
        captured: dict = {}

        def start_response(status, response_headers, exc_info=None):
            captured["status"] = status
            captured["headers"] = list(response_headers)

        chunks = self.app(environ, start_response)
        try:
            data = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        return Result(captured["status"], captured["headers"], data)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


def split_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.path, parts.query
