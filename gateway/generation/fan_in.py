"""The n request streams of one HTTP request (OpenAI `n` > 1) read as one.

Each iteration yields `[(choice index, delta), ...]`: whatever the choices produced since the
previous iteration. One `__anext__` per choice is outstanding at a time, so each choice's own
`RequestStream` stays the (bounded, merging) buffer for a slow reader. With one choice there is
no task at all: the stream is read directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from protocol.messages import Delta

Indexed = list[tuple[int, Delta]]


async def _next(iterator: AsyncIterator[list[Delta]]) -> list[Delta] | None:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return None


class Choices:
    def __init__(self, iterators: list[AsyncIterator[list[Delta]]]) -> None:
        self._iterators = iterators
        self._reads: dict[asyncio.Future[list[Delta] | None], int] | None = None

    def __aiter__(self) -> Choices:
        return self

    async def __anext__(self) -> Indexed:
        if len(self._iterators) == 1:
            return [(0, delta) for delta in await self._iterators[0].__anext__()]
        if self._reads is None:
            self._reads = {
                asyncio.ensure_future(_next(it)): i for i, it in enumerate(self._iterators)
            }
        while self._reads:
            done, _ = await asyncio.wait(self._reads, return_when=asyncio.FIRST_COMPLETED)
            out: Indexed = []
            for read in sorted(done, key=self._reads.__getitem__):
                index = self._reads.pop(read)
                batch = read.result()
                if batch is None:
                    continue  # this choice has ended
                out.extend((index, delta) for delta in batch)
                self._reads[asyncio.ensure_future(_next(self._iterators[index]))] = index
            if out:
                return out
        raise StopAsyncIteration

    def close(self) -> None:
        """Cancel the outstanding reads (the request contexts are closed by their owner)."""
        for read in self._reads or ():
            read.cancel()
        self._reads = {}
