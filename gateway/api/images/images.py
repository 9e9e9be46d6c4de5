"""`POST /v1/images/generations` and `POST /v1/images/edits`: OpenAI's Images API, served by the
worker's image engine (worker/images/).

The body is read by gateway/api/images/request.py; `model` must reach a served model that makes
images (its id, OpenAI's image model names, or, unset, the served image model), and the sizes
and steps its Ready section (`image`) allows are checked before anything is sent. Without
`stream`, the answer is one JSON body with every picture once all are made; the client going
away aborts the request between two denoising steps. With `stream`, server-sent events:
`image_generation.partial_image` (an edit: `image_edit.partial_image`) for each preview asked
for with `partial_images`, then `image_generation.completed` (`image_edit.completed`) for each
picture, with the usage so far; a failure after the start is an `error` event. Pictures are
encoded (PNG / JPEG / WebP, base64) in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.images.pictures import encoded, event_fields, response_body, usage_object
from gateway.api.images.request import (
    ImageCall,
    edit_json_url,
    parse_edit,
    parse_edit_json,
    parse_generation,
)
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.errors import APIError
from gateway.http.json_request import read_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import default_model, engine_for, ready_section
from gateway.http.multipart import read_form
from gateway.http.sse import SSE_COMMENT, sse_event
from gateway.http.streaming import (
    STALL_TIMEOUT,
    Ending,
    StreamedResponse,
    enter_one,
    keepalive_for,
    open_stream,
)
from gateway.media.images import check_image
from gateway.media.parts import MediaItem
from gateway.media.problems import MediaRejected
from gateway.media.resolve import media_settings, resolve_media
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import IMAGE
from protocol.inputs import ImageInputs
from protocol.messages import Delta, ImageOut, Usage


async def generations(request: Request) -> Response:
    call = parse_generation(await read_json(request))
    return await _serve(request, call, "image_generation")


async def edits(request: Request) -> Response:
    """The multipart form (the picture as a file), or JSON whose `images` names it by URL."""
    if request.headers.get("content-type", "").lower().startswith("application/json"):
        body = await read_json(request)
        url = edit_json_url(body)
        item = MediaItem("image", "images[0].image_url", url=url)
        pictures = await resolve_media([item], media_settings(request))
        return await _serve(request, parse_edit_json(body, pictures["images"][0]), "image_edit")
    form = await read_form(
        request, request.app.state.config.max_body_bytes, "image", "the picture to edit"
    )
    return await _serve(request, parse_edit(form), "image_edit", check_picture=True)


async def _serve(
    request: Request, call: ImageCall, events: str, check_picture: bool = False
) -> Response:
    """`check_picture`: the edit's picture came as a form file, not yet checked (one by URL
    was, as it was fetched)."""
    name = call.model or default_model(request, IMAGE)
    engine = await engine_for(request, name, IMAGE)
    resolve_model(request, name, IMAGE)
    info = ready_section(engine, name, IMAGE)
    if call.image is not None and not info.edit:
        raise APIError(
            400,
            f"The model `{name}` makes pictures but does not edit them ({info.family})",
            param=call.image_param,
            code="model_not_supported",
        )
    inputs = call.inputs(info)
    if check_picture and call.image is not None:
        await _check_picture(request, call.image)
    if call.stream:
        return await _stream(request, engine, call, inputs, events)
    pictures, usage = await _collect(request, engine, inputs, call)
    body = await run_in_threadpool(response_body, call, pictures, usage)
    return JSONResponse(body)


async def _check_picture(request: Request, picture: bytes) -> None:
    """As a picture by URL is checked (gateway/media/resolve.py): whole, and not too large;
    after the cheaper checks of the request, so a refused size costs no decoding."""
    try:
        pixels = media_settings(request).max_image_pixels
        await asyncio.to_thread(check_image, picture, pixels, "the picture")
    except MediaRejected as exc:
        raise APIError(400, f"`image`: {exc.message}", param="image", code=exc.code) from None


async def _collect(
    request: Request, engine: EngineClient, inputs: ImageInputs, call: ImageCall
) -> tuple[list[ImageOut], Usage]:
    watcher = DisconnectWatcher(request.receive)
    try:
        return await watcher.run(_pictures(engine, inputs, call))
    finally:
        watcher.close()


async def _pictures(
    engine: EngineClient, inputs: ImageInputs, call: ImageCall
) -> tuple[list[ImageOut], Usage]:
    pictures: list[ImageOut] = []
    async with engine.request(inputs, False) as batches:
        async for batch in batches:
            for delta in batch:
                pictures += [p for p in delta.images if p.partial is None]
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise named(error, call)
                    return pictures, delta.usage or Usage(0, 0)
    raise errors.no_terminal("image request")


async def _stream(
    request: Request, engine: EngineClient, call: ImageCall, inputs: ImageInputs, events: str
) -> StreamedResponse[tuple[list[bytes], Ending]]:
    frames = _Frames(call, events)

    async def enter(
        stack: AsyncExitStack,
    ) -> tuple[AsyncIterator[tuple[list[bytes], Ending]], tuple[list[bytes], Ending]]:
        batches, first = await enter_one(engine, inputs, stack, what="image request")
        return _encoded(batches, frames), await asyncio.to_thread(frames.encode, first)

    try:
        opened = await open_stream(request, enter, keepalive_for(request, SSE_COMMENT))
    except APIError as exc:  # refused before the stream started: an HTTP status
        raise named(exc, call) from None
    # A reader that stops reading is cut off after STALL_TIMEOUT: a batch of pictures cannot
    # be merged into less while it waits.
    return StreamedResponse(opened, _as_encoded, _sse_error, "image request", None, STALL_TIMEOUT)


async def _encoded(
    batches: AsyncIterator[list[Delta]], frames: _Frames
) -> AsyncIterator[tuple[list[bytes], Ending]]:
    """Each batch's events, the pictures in them encoded in a thread."""
    async for batch in batches:
        yield await asyncio.to_thread(frames.encode, batch)


def _as_encoded(encoded: tuple[list[bytes], Ending]) -> tuple[list[bytes], Ending]:
    return encoded


class _Frames:
    """Image deltas -> one SSE event per preview and per picture."""

    def __init__(self, call: ImageCall, events: str) -> None:
        self.call = call
        self.events = events
        self.usage = Usage(0, 0)

    def encode(self, batch: list[Delta]) -> tuple[list[bytes], Ending]:
        writes: list[bytes] = []
        for delta in batch:
            self.usage = delta.usage or self.usage
            writes += [self._event(picture) for picture in delta.images]
            if delta.finish_reason is None:
                continue
            error = errors.terminal_error(delta)
            return writes, named(error, self.call) if error is not None else True
        return writes, False

    def _event(self, picture: ImageOut) -> bytes:
        fields = event_fields(self.call, picture)
        data = encoded(self.call, picture)
        if picture.partial is not None:
            name = f"{self.events}.partial_image"
            body = {"type": name, "b64_json": data, **fields}
            body["partial_image_index"] = picture.partial
        else:
            name = f"{self.events}.completed"
            body = {"type": name, "b64_json": data, **fields, "usage": usage_object(self.usage)}
        return sse_event(name, body)


# The worker names a field of its own request (protocol/inputs.py ImageInputs) first in a 400;
# the client sent it under the Images API's name.
_API_NAMES = {"steps": "num_inference_steps", "guidance": "guidance_scale"}
_FIELDS = ("prompt", "size", "n", "image", "partial_images", *_API_NAMES)


def named(error: APIError, call: ImageCall) -> APIError:
    """A worker's 400 with `param`: the field its message names first (`size: ...`), as the
    request holds it (a JSON edit's picture is `images[0].image_url`)."""
    field = error.message.split(":", 1)[0]
    if error.status == 400 and error.param is None and field in _FIELDS:
        error.param = call.image_param if field == "image" else _API_NAMES.get(field, field)
    return error


def _sse_error(error: APIError) -> bytes:
    return sse_event("error", {"type": "error", **error.body()})
