"""Cancel a request's work the moment its HTTP client goes away.

Once the body has been read, the only message ASGI `receive()` can still deliver is
`http.disconnect`. A `DisconnectWatcher` listens for it in one background task for the whole
life of a request (admission wait, generation, streaming) and cancels the work it runs, so the
engine's request context is exited and the worker gets its Abort at once, not when the next
token fails to send. One task per request, not per token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The HTTP client went away before the response was complete."""


class DisconnectWatcher:
    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return

    async def run(self, work: Awaitable[T]) -> T:
        """Await `work`; if the client disconnects first, cancel it and raise ClientDisconnected."""
        task = asyncio.ensure_future(work)
        try:
            await asyncio.wait({task, self._listener}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # Our own caller was cancelled (server shutdown): take the work down with us.
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        if task.done():
            return task.result()
        task.cancel()
        # Let the work unwind (its `async with` exits and sends the Abort) before we return.
        await asyncio.gather(task, return_exceptions=True)
        raise ClientDisconnected()

    def close(self) -> None:
        if not self._listener.done():
            self._listener.cancel()
