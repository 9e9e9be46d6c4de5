"""Incremental server-sent-events parser: bytes in, the `data` payloads of complete events out.

The client reads the stream in whatever pieces the socket delivers, so an event may be split
across reads or several may arrive in one. Lines end with LF or CRLF (a bare CR is not treated
as a line end: no OpenAI-compatible server sends one). Only `data` fields matter here; `event`,
`id`, `retry` and comment lines are skipped.
"""

from __future__ import annotations


class SSEParser:
    """Feed it the body's bytes as they arrive; it returns each finished event's data."""

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        """The data of every event completed by `chunk` (multi-line data joined by LF)."""
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        events: list[str] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                # One space after the colon belongs to the framing, not the value.
                self._data.append(value[1:].decode() if value[:1] == b" " else value.decode())
        return events

    def close(self) -> list[str]:
        """At end of stream: the last event if the server omitted its closing blank line."""
        events = self.feed(b"\n\n") if self._pending or self._data else []
        self._pending = b""
        return events
