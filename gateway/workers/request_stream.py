"""One request's deltas on their way from the worker to the HTTP handler that reads them.

A `RequestStream` is an async iterator of `list[Delta]`: each iteration yields everything that
arrived since the previous one and the iteration ends after the terminal delta. Memory stays
bounded for a slow reader because consecutive non-terminal deltas are merged into one as
they arrive (text, reasoning, token ids and logprobs concatenated, the argument pieces of one
tool call joined): the buffer holds one pending delta per switch between reasoning, text and
tool calls, plus the terminal one. Audio (PCM) is never merged but capped: past
`max_audio_bytes` waiting, the stream ends itself with a "slow_reader" error and drops the
audio. Pictures (and their previews) are capped the same way, past `MAX_PENDING_IMAGE_BYTES`. Deltas pushed after the terminal one are dropped, so a request sees exactly one
terminal delta even when the gateway and the worker both end it.
"""

from __future__ import annotations

import asyncio

from protocol.messages import Delta, ErrorCode, ErrorInfo, FinishReason, ToolCallDelta

# Output kinds in the order a merged delta is rendered: reasoning, then text, then tool calls.
_REASONING, _TEXT, _TOOLS = 0, 1, 2


def _kinds(delta: Delta) -> tuple[int, int] | None:
    """(first, last) output kind a delta holds, in rendering order; None when it holds none."""
    present = [
        kind
        for kind, value in (
            (_REASONING, delta.reasoning),
            (_TEXT, delta.text),
            (_TOOLS, delta.tool_calls),
        )
        if value
    ]
    return (present[0], present[-1]) if present else None


def mergeable(last: Delta, delta: Delta) -> bool:
    """Whether `delta` may join `last` without reordering output (neither is terminal, and
    `delta` holds nothing that renders before what `last` already holds)."""
    if last.finish_reason is not None or delta.finish_reason is not None:
        return False
    if last.audio or delta.audio:  # PCM is kept as it came, and counted (RequestStream.push)
        return False
    if not (delta.reasoning or delta.tool_calls or last.tool_calls):
        return True  # the per-token common case: text after anything but a tool call
    new, old = _kinds(delta), _kinds(last)
    return new is None or old is None or new[0] >= old[1]


def merge_into(last: Delta, delta: Delta) -> None:
    """Append `delta`'s output to `last` (which must be a delta this code may mutate)."""
    last.text += delta.text
    last.reasoning += delta.reasoning
    last.token_ids.extend(delta.token_ids)
    for piece in delta.tool_calls:
        tail = last.tool_calls[-1] if last.tool_calls else None
        if (
            tail is not None
            and tail.index == piece.index
            and piece.id is None
            and piece.name is None
        ):
            tail.arguments += piece.arguments
        else:
            last.tool_calls.append(
                ToolCallDelta(piece.index, piece.id, piece.name, piece.arguments)
            )
    if delta.logprobs is not None:
        last.logprobs = (last.logprobs or []) + delta.logprobs
    if delta.usage is not None:
        last.usage = delta.usage
    if delta.progress is not None:  # a video's: the latest says how far it is
        last.progress = delta.progress
    if delta.segments:
        last.segments.extend(delta.segments)
    if delta.images:
        last.images.extend(delta.images)
    if delta.language:
        last.language = delta.language


# Audio cannot be merged into less: past this many bytes of PCM waiting for its reader, a
# request is cut off (terminal "slow_reader" error; OpenRequests then aborts it at the worker).
MAX_PENDING_AUDIO_BYTES = 8 << 20  # about 3 minutes of 24 kHz int16 speech
# Pictures likewise (RGB bytes): five of the largest (2048x2048) a worker makes.
MAX_PENDING_IMAGE_BYTES = 64 << 20


class RequestStream:
    def __init__(self, request_id: str, max_audio_bytes: int | None = None) -> None:
        self.request_id = request_id
        self.terminal: Delta | None = None  # set once the terminal delta has been pushed
        self._pending: list[Delta] = []
        self._wakeup = asyncio.Event()
        self._max_audio_bytes = max_audio_bytes or MAX_PENDING_AUDIO_BYTES
        self._audio_bytes = 0  # PCM in _pending
        self._image_bytes = 0  # picture pixels in _pending

    @property
    def finished(self) -> bool:
        return self.terminal is not None

    def push(self, delta: Delta) -> None:
        if self.terminal is not None:
            return
        if delta.audio:
            self._audio_bytes += len(delta.audio)
            if self._audio_bytes > self._max_audio_bytes:
                self._cut_off(f"audio too slowly: over {self._max_audio_bytes} bytes waited")
                return
        if delta.images and delta.finish_reason is None:  # (the terminal one always goes)
            self._image_bytes += sum(len(picture.pixels) for picture in delta.images)
            if self._image_bytes > MAX_PENDING_IMAGE_BYTES:
                self._cut_off(f"pictures too slowly: over {MAX_PENDING_IMAGE_BYTES} bytes waited")
                return
        last = self._pending[-1] if self._pending else None
        if last is not None and mergeable(last, delta):
            merge_into(last, delta)
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
        return self.take()

    def take(self) -> list[Delta]:
        """Everything pending now (maybe nothing), merged: no two of it could be one delta."""
        batch, self._pending = self._pending, []
        self._audio_bytes = self._image_bytes = 0
        return batch

    def _cut_off(self, what: str) -> None:
        error = ErrorInfo(ErrorCode.SLOW_READER, f"the client read {what}")
        self.terminal = Delta(self.request_id, finish_reason=FinishReason.ERROR, error=error)
        self._pending = [self.terminal]  # the waiting audio or pictures are dropped
        self._audio_bytes = self._image_bytes = 0
        self._wakeup.set()
