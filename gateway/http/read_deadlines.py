"""Deadlines for reading a request: a client that trickles its headers or its body is cut off.

uvicorn waits as long as a client keeps sending: eight connections that send one header line
(or one body byte) every few seconds hold eight sockets, and their tasks, for minutes
("slowloris"). Here every request gets two deadlines, as nginx's `client_header_timeout` and
`client_body_timeout` give (though counted over the whole read, not between reads, so a trickle
cannot reset them):

- its headers must be complete within `header_timeout` seconds of its first byte (of the
  connection's opening, for the first request: a connection that sends nothing is closed too);
- its body must be complete within `body_timeout` seconds of its headers.
Past one, the connection is closed (and the request, if the app already had it, sees a
disconnect). A WebSocket is under the header deadline only; a response being streamed, under
neither. Uploads over slow links may need a longer `--body-timeout`; large deployments put a
buffering proxy in front, which reads the whole request before passing it on (README,
"Slow clients").
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


def protocol_with_deadlines(header_timeout: float, body_timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the two deadlines (`uvicorn.Config(http=...)`)."""

    class DeadlineProtocol(_Deadlines):
        pass

    DeadlineProtocol.header_timeout = header_timeout
    DeadlineProtocol.body_timeout = body_timeout
    return DeadlineProtocol


class _Deadlines(HttpToolsProtocol):
    header_timeout = 30.0
    body_timeout = 30.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm(self.header_timeout, "headers")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a later request on a kept-alive connection
            self._arm(self.header_timeout, "headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_timeout, "body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        if seconds > 0:
            self._deadline = self.loop.call_later(seconds, self._expired, what, seconds)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, what: str, seconds: float) -> None:
        self._deadline = None
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning("closed the connection of %s: its request %s took over %g s", client, what,
                    seconds)  # fmt: skip
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()
