"""What the two schemathesis runs share (the vendored OpenAI document, and our own): the
settings, the hooks' deterministic chances, the call with both checks."""

from __future__ import annotations

import zlib
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance


def bounded(examples: int) -> settings:
    """`examples` requests per operation, explicit and generated, reproducible, no deadline."""
    return settings(
        max_examples=examples,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )


def chance(value: Any) -> float:
    """A number in [0, 1) fixed by `value`: the hooks' choices replay with their examples."""
    return zlib.crc32(repr(value).encode()) / 2**32


def small_video(body: Any) -> None:
    """A /videos body the tiny MiniMax-H3 makes in about a second, whatever was generated (its
    default, the 1344x768 canvas with 30 steps, takes minutes and gigabytes here): 32x32,
    5 s, 2 steps. Called for every case, also the explicit ones that skip the body hooks."""
    if isinstance(body, dict):
        body.update(size="32x32", seconds="5", num_inference_steps=2)


def forget_video(server: Any, response: Any) -> None:
    """A job a generated request started is deleted at once (aborted before it takes the
    worker's time from the tests beside the run): its 2xx is what the run checks."""
    if response.status_code == 200:
        video_id = response.json()["id"]
        httpx.delete(f"{server.url}/v1/videos/{video_id}", headers=server.headers, timeout=30)


def call_and_check(case: Any, server: Any, base_url: str) -> None:
    """One generated request: no 5xx, and the answer conforms to its documented schema."""
    case.call_and_validate(
        base_url=base_url,
        headers=server.headers,
        checks=[not_a_server_error, response_schema_conformance],
        timeout=60,
    )
