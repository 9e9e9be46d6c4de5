"""What the HTTP layer may ask of the engines: the `EngineClient` protocol.

Routes and streams depend on this, not on how the engines are reached, so the one-worker client
(`client.WorkerEngineClient`), a pool of them, and the tests' scripted stand-in are
interchangeable. The contract of `request()`: entering the context admits the request and
submits it (raising `EngineUnavailable` / `QueueFull` when it cannot); iterating yields batches
of deltas, each batch merged (no two consecutive deltas could have been one, see
`request_stream.mergeable`), and ends after exactly one terminal delta; leaving the context
before that aborts the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from protocol.inputs import ChatInputs, Inputs
from protocol.messages import Delta, Ready, TokenizeArgs

RequestBatches = AsyncIterator[list[Delta]]


@runtime_checkable
class EngineClient(Protocol):
    @property
    def state(self) -> str: ...  # starting | ready | restarting | swapping | failed | stopped

    @property
    def reason(self) -> str | None: ...  # why it is not ready, for anyone to read

    @property
    def model_name(self) -> str: ...

    @property
    def model_path(self) -> str: ...

    @property
    def ready_info(self) -> Ready | None: ...  # the worker's capabilities, limits, voices

    def health(self) -> tuple[int, dict[str, Any]]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def request(
        self, inputs: Inputs, stream: bool
    ) -> AbstractAsyncContextManager[RequestBatches]: ...  # the operation is the inputs' type

    async def count_tokens(self, inputs: ChatInputs) -> int: ...

    async def tokenize(
        self, args: TokenizeArgs
    ) -> tuple[list[int], list[str] | None]: ...  # ids, and their strings when asked

    async def detokenize(self, tokens: list[int]) -> str: ...

    async def worker_stats(self) -> dict[str, Any]: ...

    async def change_adapter(
        self, name: str, path: str | None, replace: bool = False
    ) -> None: ...  # load (path) or unload (None) a LoRA adapter; WorkerRejected says why

    async def swap(
        self, model_path: str, served_model_name: str | None = None
    ) -> dict[str, Any]: ...
