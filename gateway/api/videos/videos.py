"""OpenAI's video API: `POST /v1/videos` starts a job on the worker's video engine
(worker/videos/), `GET /v1/videos` lists the jobs, `GET /v1/videos/{video_id}` reports one,
`DELETE /v1/videos/{video_id}` forgets one (aborting it if it runs) and `GET
/v1/videos/{video_id}/content` gives the clip: the MP4 (`variant=video`, the default) or its
first frame (`variant=thumbnail`, a lossless WebP). The jobs live in the gateway
(jobs.py); a job's `model` must reach a served model that makes video (its id, OpenAI's names
for it, or, unset, the served video model), and the size, length and steps it allows (its
Ready section, `video`) are checked before the job starts.
"""

from __future__ import annotations

import io
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.videos.jobs import Job, VideoJobs
from gateway.api.videos.request import parse_form, parse_json
from gateway.http import errors
from gateway.http.errors import APIError, invalid, unsupported
from gateway.http.json_request import read_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import default_model, engine_for, ready_section
from gateway.http.multipart import read_form
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import VIDEO
from protocol.inputs import VideoInputs

VARIANTS = ("video", "thumbnail", "spritesheet")
ORDERS = ("asc", "desc")


def jobs_of(request: Request) -> VideoJobs:
    return request.app.state.videos


async def create(request: Request) -> Response:
    if request.headers.get("content-type", "").lower().startswith("application/json"):
        call = parse_json(await read_json(request))
    else:
        form = await read_form(
            request, request.app.state.config.max_body_bytes, "prompt", "the prompt"
        )
        call = parse_form(form)
    name = call.model or default_model(request, VIDEO)
    engine = await engine_for(request, name, VIDEO)
    model = resolve_model(request, name, VIDEO)
    inputs = call.inputs(ready_section(engine, name, VIDEO))
    leases: list[Any] = []  # taken once the job exists (its task has not run yet)
    job = jobs_of(request).start(
        model.id,
        call.prompt,
        f"{inputs.width}x{inputs.height}",
        f"{inputs.seconds:g}",
        lambda job: _generate(request, engine, inputs, job),
        lambda: _release(request, leases),
        inputs.seed,
    )
    leases += _take_leases(request)
    return JSONResponse(job.resource())


async def retrieve(request: Request) -> Response:
    return JSONResponse(_job(request).resource())


async def listed(request: Request) -> Response:
    query = request.query_params
    limit = _limit(query.get("limit"))
    order = query.get("order") or "desc"
    if order not in ORDERS:
        raise invalid("order", "`order` must be asc or desc")
    jobs = jobs_of(request).listed(order)
    after = query.get("after")
    if after is not None:
        ids = [j.id for j in jobs]
        if after not in ids:
            raise invalid("after", f"`after`: no video with id {after!r}")
        jobs = jobs[ids.index(after) + 1 :]
    page = jobs[:limit]
    return JSONResponse(
        {
            "object": "list",
            "data": [j.resource() for j in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": len(jobs) > len(page),
        }
    )


async def delete(request: Request) -> Response:
    video_id = request.path_params["video_id"]
    if await jobs_of(request).delete(video_id) is None:
        raise _not_found(video_id)
    return JSONResponse({"id": video_id, "object": "video.deleted", "deleted": True})


async def content(request: Request) -> Response:
    job = _job(request)
    variant = request.query_params.get("variant") or "video"
    if variant not in VARIANTS:
        raise invalid("variant", "`variant` must be video, thumbnail or spritesheet")
    if variant == "spritesheet":
        raise unsupported("variant", "spritesheets; video and thumbnail are")
    if job.clip is None:
        raise APIError(
            400,
            f"The video {job.id} is {job.status}: its content is there once it completed",
            param="video_id",
            code="video_not_ready",
        )
    if variant == "thumbnail":
        return Response(await run_in_threadpool(_webp, job), media_type="image/webp")
    return Response(job.clip.mp4, media_type="video/mp4")


# -- the job ---------------------------------------------------------------------------------


async def _generate(request: Request, engine: EngineClient, inputs: VideoInputs, job: Job) -> None:
    """The worker's request, once the engine has room for it, to its terminal delta."""
    jobs = jobs_of(request)
    async with jobs.turn(engine), engine.request(inputs, True) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.progress is not None:
                    job.status, job.progress = "in_progress", delta.progress
                if delta.finish_reason is None:
                    continue
                error = errors.terminal_error(delta)
                if error is not None:
                    jobs.fail(job, error)
                elif delta.video is not None:
                    jobs.complete(job, delta.video)
                return


def _release(request: Request, leases: list[Any]) -> None:
    """The pool's leases the job held end with it."""
    for entry in leases:
        request.app.state.pool.release(entry)


def _take_leases(request: Request) -> list[Any]:
    """The pool's leases of this request, kept by the job instead of ending with the
    response (gateway/pool/leases.py): the model stays loaded while the job runs."""
    leases = list(getattr(request.state, "pool_leases", None) or ())
    request.state.pool_leases = []
    return leases


def _webp(job: Job) -> bytes:
    from PIL import Image

    assert job.clip is not None
    clip = job.clip
    picture = Image.frombytes("RGB", (clip.width, clip.height), clip.first_frame)
    out = io.BytesIO()
    picture.save(out, "WEBP", lossless=True)
    return out.getvalue()


# -- lookups ---------------------------------------------------------------------------------


def _job(request: Request) -> Job:
    video_id = request.path_params["video_id"]
    job = jobs_of(request).get(video_id)
    if job is None:
        raise _not_found(video_id)
    return job


def _not_found(video_id: str) -> APIError:
    return APIError(
        404,
        f"No video with id {video_id!r} (jobs are kept in memory, for an hour once finished)",
        param="video_id",
        code="not_found",
    )


def _limit(text: str | None) -> int:
    if text is None:
        return 20
    if not (text.isascii() and text.isdigit()) or not 0 <= int(text) <= 100:
        raise invalid("limit", "`limit` must be an integer from 0 to 100")
    return int(text)
