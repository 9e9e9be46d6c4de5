"""One request's deltas on their way from the worker to the HTTP handler that reads them.

A `RequestStream` is an async iterator of `list[Delta]`: each iteration yields everything that
arrived since the previous one and the iteration ends after the terminal delta. Memory stays
bounded for a slow reader because consecutive non-terminal deltas are merged into one as
they arrive (their text and token ids concatenated): the buffer never holds more than one
pending text delta plus the terminal one. Deltas pushed after the terminal one are dropped, so a
request sees exactly one terminal delta even when the gateway and the worker both end it.
"""

from __future__ import annotations

import asyncio

from protocol.messages import Delta


class RequestStream:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.terminal: Delta | None = None  # set once the terminal delta has been pushed
        self._pending: list[Delta] = []
        self._wakeup = asyncio.Event()

    @property
    def finished(self) -> bool:
        return self.terminal is not None

    def push(self, delta: Delta) -> None:
        if self.terminal is not None:
            return
        last = self._pending[-1] if self._pending else None
        if delta.finish_reason is None and last is not None and last.finish_reason is None:
            last.text += delta.text
            last.token_ids.extend(delta.token_ids)
        else:
            self._pending.append(delta)
        if delta.finish_reason is not None:
            self.terminal = delta
        self._wakeup.set()

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> list[Delta]:
        while not self._pending:
            if self.terminal is not None:
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()
        batch, self._pending = self._pending, []
        return batch
