"""Images out on mlx-vlm: a prompt (and a picture to edit) -> pictures, implementing
`worker.runtime.engine.Engine`.

Each picture is one call of mlx-vlm's `generate_image` (an edit: `edit_image`) on the loaded
model, run in a `Run` (worker/images/paced.py) that pauses at every call of the denoising
transformer: `step()` resumes one active request's run once, the requests taking turns, so one
denoising step runs per worker iteration and aborts, deadlines and the other engines' requests
(a chat's next token) get the thread between any two steps. Picture i of a request is generated with seed `seed + i` after
picture i - 1, and is pixel for pixel what `generate_image` makes directly with that seed.
Previews (`partial_images`): the latents after evenly spaced steps, decoded as the pipeline
decodes its final ones (worker/images/families.py), sent as they are made. A picture goes out
in the delta of the step that finished it.

Usage on the terminal delta: prompt_tokens = the prompt's tokens as the text encoder reads
them; completion_tokens = the denoising steps run, all pictures together.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import random
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from protocol.inputs import MAX_SEED, ImageInputs, Op
from protocol.messages import Delta, ErrorInfo, FinishReason, ImageOut, Submit, Usage
from protocol.ready import Capability, ImageInfo
from worker.images.families import MAX_SIDE, MAX_STEPS
from worker.images.model import ImageModel
from worker.images.paced import Run
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.request_log import named

log = logging.getLogger(__name__)

MAX_IMAGES = 10  # pictures per request (OpenAI's bound on n)
MAX_PARTIAL_IMAGES = 3  # previews per picture (OpenAI's bound on partial_images)
# An edit's picture: read by these decoders only, and at most this many pixels (the gateway's
# --max-image-pixels is checked first; this bounds what a remote gateway could send).
SOURCE_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp"}
# What Pillow reports opening them: a camera's JPEG is often MPO (its first frame is the photo).
_OPENED_AS = {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "WEBP": "WEBP"}
MAX_SOURCE_PIXELS = 64 << 20


@dataclass
class _Job:
    submit: Submit
    inputs: ImageInputs
    seed: int
    steps: int  # the denoising steps it will run: what the previews are spaced over
    prompt_tokens: int
    source: Path | None = None  # an edit's picture, as a file for the library
    index: int = 0  # the picture being made
    run: Run | None = None
    previews_at: frozenset[int] = frozenset()  # steps done after which a preview goes out
    previews_sent: int = 0  # of the current picture
    steps_done: int = 0

    def close(self) -> None:
        if self.run is not None:
            self.run.stop()
            self.run = None
        if self.source is not None:
            with contextlib.suppress(OSError):
                self.source.unlink()
            self.source = None


class ImageEngine:
    ops = frozenset({Op.IMAGE})

    def __init__(self, model: ImageModel) -> None:
        self.model = model
        self._jobs: dict[str, _Job] = {}
        self._turn = 0  # the position in arrival order of the request step() advances next
        self._stats: Any = None

    def bind_stats(self, stats: Any) -> None:
        self._stats = stats

    # -- Engine ----------------------------------------------------------------------------

    def admit(self, submit: Submit) -> Delta:
        inputs = submit.inputs
        assert isinstance(inputs, ImageInputs)
        try:
            job = self._job(submit, inputs)
        except RequestError as exc:
            return Delta(
                submit.request_id, finish_reason=FinishReason.ERROR, usage=Usage(0, 0),
                error=exc.info(),
            )  # fmt: skip
        self._jobs[submit.request_id] = job
        return Delta(submit.request_id)

    def step(self) -> list[Delta]:
        if not self._jobs:
            return []
        # The requests take turns in arrival order; one that ends leaves its turn to the next.
        jobs = list(self._jobs.values())
        job = jobs[self._turn % len(jobs)]
        self._turn = self._turn % len(jobs) + 1
        try:
            delta = self._advance(job)
        except RequestError as exc:
            delta = self._end(job, FinishReason.ERROR, exc.info())
        except Exception as exc:  # the request was checked up front: the library failed
            log.exception(
                "image request %s failed", job.submit.request_id,
                extra=named(job.submit.request_id),
            )  # fmt: skip
            delta = self._end(job, FinishReason.ERROR, internal(exc))
        if job.submit.request_id not in self._jobs:
            self._turn -= 1  # it ended: the next request moved into its place
        return [delta] if delta is not None else []

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        return [
            self._end(self._jobs[rid], FinishReason.ABORT)
            for rid in request_ids
            if rid in self._jobs
        ]

    def active_ids(self) -> list[str]:
        return list(self._jobs)

    def capabilities(self) -> list[Capability]:
        found = [Capability.IMAGE_OUT]
        return found + [Capability.IMAGE_EDIT] if self.model.edit is not None else found

    def ready_info(self) -> ImageInfo:
        family = self.model.family
        return ImageInfo(
            model_path=self.model.path,
            family=family.name,
            default_steps=self.model.default_steps,
            default_guidance=self.model.default_guidance,
            min_steps=family.min_steps,
            max_steps=MAX_STEPS,
            min_side=family.min_side,
            max_side=MAX_SIDE,
            side_multiple=family.side_multiple,
            edit=self.model.edit is not None,
            previews=True,
            max_guidance=self.model.max_guidance,
            default_edit_steps=(
                self.model.default_steps_of(editing=True) if self.model.edit is not None else None
            ),
        )

    # -- requests --------------------------------------------------------------------------

    def _job(self, submit: Submit, inputs: ImageInputs) -> _Job:
        family = self.model.family
        if not inputs.prompt.strip():
            raise bad_request("prompt: must not be empty")
        if not 1 <= inputs.n <= MAX_IMAGES:
            raise bad_request(f"n: must be 1 to {MAX_IMAGES}, got {inputs.n}")
        if not 0 <= inputs.partial_images <= MAX_PARTIAL_IMAGES:
            raise bad_request(
                f"partial_images: must be 0 to {MAX_PARTIAL_IMAGES}, got {inputs.partial_images}"
            )
        editing = inputs.image is not None
        if editing and self.model.edit is None:
            raise bad_request(f"image: the {family.name} family generates but does not edit")
        least = 1 if editing else family.min_steps
        if inputs.steps is not None and not least <= inputs.steps <= MAX_STEPS:
            raise bad_request(f"steps: must be {least} to {MAX_STEPS}, got {inputs.steps}")
        if inputs.guidance is not None and not (
            math.isfinite(inputs.guidance) and inputs.guidance >= 0
        ):
            raise bad_request(f"guidance: must be a finite number >= 0, got {inputs.guidance}")
        most = self.model.max_guidance
        if inputs.guidance is not None and most is not None and inputs.guidance > most:
            raise bad_request(
                f"guidance: this {family.name} model takes 0 to {most:g} (it is distilled "
                f"without classifier-free guidance), got {inputs.guidance:g}"
            )
        width, height = inputs.width, inputs.height
        kind = None
        if inputs.image is not None:
            kind, (width, height) = self._source_size(inputs.image, width, height)
        for name, side in (("width", width), ("height", height)):
            if not family.min_side <= side <= MAX_SIDE or side % family.side_multiple:
                raise bad_request(
                    f"size: the {name} must be a multiple of {family.side_multiple} from "
                    f"{family.min_side} to {MAX_SIDE} pixels, got {side}"
                )
        tokens = self.model.prompt_tokens(inputs.prompt)
        if tokens > family.max_prompt_tokens:
            raise bad_request(
                f"prompt: {tokens} tokens, over the {family.max_prompt_tokens} the "
                f"{family.name} text encoder reads"
            )
        steps = family.denoising_steps(
            inputs.steps or self.model.default_steps_of(editing), editing
        )
        seed = inputs.seed if inputs.seed is not None else random.randint(0, MAX_SEED)
        job = _Job(submit, inputs, seed, steps, tokens)
        if inputs.partial_images and steps > 1:
            k = inputs.partial_images
            spaced = {round(steps * (j + 1) / (k + 1)) for j in range(k)}
            job.previews_at = frozenset(s for s in spaced if 1 <= s < steps)
        if inputs.image is not None and kind is not None:  # last: nothing can refuse it now
            job.source = _write_source(inputs.image, SOURCE_FORMATS[kind])
        return job

    def _source_size(self, data: bytes, width: int, height: int) -> tuple[str, tuple[int, int]]:
        """The format of the picture to edit and the size of the result: the request's, or the
        picture's rounded down to the family's multiple (as the pipeline does). Only the
        header is read here (the gateway decoded the picture whole)."""
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data), formats=list(_OPENED_AS)) as picture:
                kind, (wide, high) = _OPENED_AS[str(picture.format)], picture.size
        except Image.DecompressionBombError:
            raise bad_request(
                f"image: over the {MAX_SOURCE_PIXELS} pixels this server edits"
            ) from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, KeyError):
            raise bad_request(
                "image: not a picture this server can read (PNG, JPEG, WebP)"
            ) from None
        if wide * high > MAX_SOURCE_PIXELS:
            raise bad_request(
                f"image: {wide}x{high} pixels, over the {MAX_SOURCE_PIXELS} this server edits"
            )
        if not width or not height:  # size auto: the picture's own
            family = self.model.family
            width, height = wide - wide % family.side_multiple, high - high % family.side_multiple
            if not family.min_side <= min(width, height) <= max(width, height) <= MAX_SIDE:
                raise bad_request(
                    f"image: a {wide}x{high} picture; with size auto the result takes its size, "
                    f"which must be {family.min_side} to {MAX_SIDE} pixels a side: pass a size"
                )
        return kind, (width, height)

    def _advance(self, job: _Job) -> Delta | None:
        if job.run is None:
            job.run = Run(partial(self._generate, job, job.index))
            job.previews_sent = 0
        run = job.run
        new_step = run.advance()
        for seconds in run.step_seconds:
            job.steps_done += 1
            if self._stats is not None:
                self._stats.count_image_step(seconds)
        run.step_seconds.clear()
        images = []
        if run.dead:
            images.append(self._picture(job, run.result.array))
            job.run = None
            job.index += 1
            if job.index == job.inputs.n:
                return self._end(job, FinishReason.STOP, images=images)
        elif new_step and run.steps - 1 in job.previews_at:
            preview = self.model.family.preview(self.model.pipeline, run.latents)
            images.append(self._picture(job, preview, partial=job.previews_sent))
            job.previews_sent += 1
        if not images:
            return None
        # The usage so far rides with each picture (a stream's completed event reports it).
        usage = Usage(job.prompt_tokens, job.steps_done) if run.dead else None
        return Delta(job.submit.request_id, images=images, usage=usage)

    def _generate(self, job: _Job, index: int) -> Any:
        from mlx_vlm.generate.edit_image import ImageEditRequest, edit_image
        from mlx_vlm.generate.image import ImageGenerationRequest, generate_image

        inputs = job.inputs
        seed = job.seed + index
        if job.source is None:
            request = ImageGenerationRequest(
                inputs.prompt,
                seed=seed,
                steps=inputs.steps,
                width=inputs.width,
                height=inputs.height,
                guidance=inputs.guidance,
            )
            return generate_image(self.model.generation, request)
        assert self.model.edit is not None  # admit refused edits on a model without one
        edit = ImageEditRequest(
            inputs.prompt,
            image_paths=(str(job.source),),
            seed=seed,
            steps=inputs.steps,
            width=inputs.width or None,
            height=inputs.height or None,
            guidance=inputs.guidance,
        )
        return edit_image(self.model.edit, edit)

    def _picture(self, job: _Job, array: Any, partial: int | None = None) -> ImageOut:
        pixels = np.asarray(array, dtype=np.uint8)
        if pixels.ndim == 4:
            pixels = pixels[0]
        if pixels.shape[-1] == 4:  # RGBA: the server's pictures are RGB
            pixels = pixels[..., :3]
        height, width = pixels.shape[:2]
        return ImageOut(
            index=job.index,
            width=width,
            height=height,
            pixels=np.ascontiguousarray(pixels).tobytes(),
            seed=job.seed + job.index,
            partial=partial,
        )

    def _end(
        self,
        job: _Job,
        reason: FinishReason,
        error: ErrorInfo | None = None,
        images: list[ImageOut] | None = None,
    ) -> Delta:
        job.close()
        self._jobs.pop(job.submit.request_id, None)
        usage = Usage(prompt_tokens=job.prompt_tokens, completion_tokens=job.steps_done)
        return Delta(
            job.submit.request_id,
            finish_reason=reason,
            usage=usage,
            error=error,
            images=images or [],
        )


def _write_source(data: bytes, suffix: str) -> Path:
    """The picture to edit as a file for the library (its bytes as sent); none is left
    behind if writing fails."""
    handle, name = tempfile.mkstemp(prefix="vomlx-edit-", suffix=suffix)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def load_image_engine(path: str) -> ImageEngine:
    from worker.images.model import load_image_model

    return ImageEngine(load_image_model(path))
