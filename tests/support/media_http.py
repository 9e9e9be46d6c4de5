"""A tiny threaded HTTP server for the media-fetch tests: canned routes, a hit counter.

Routes map a path to (status, headers, body) or to a callable writing the response itself
(slow or chunked bodies). Bind it to 127.0.0.1 or another loopback address (Linux answers on
all of 127/8), which the tests' injected address policy treats as public or private.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = tuple[int, dict[str, str], bytes] | Callable[[BaseHTTPRequestHandler], None]


class MediaServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        routes: dict[str, Route] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: list[tuple[str, str]] = []  # (path, Host header)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                outer.hits.append((self.path, self.headers.get("Host", "")))
                route = outer.routes.get(self.path)
                if route is None:
                    route = (404, {}, b"not found")
                if callable(route):
                    route(self)
                    return
                status, headers, body = route
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:  # HTTPS: every accepted connection does the TLS handshake
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self.host = host
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def url(self, path: str = "/") -> str:
        return f"{self.scheme}://{self.host}:{self.port}{path}"

    def __enter__(self) -> MediaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
