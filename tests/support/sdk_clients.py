"""The official SDKs as clients of the real app over a fake engine, in-process.

The openai SDK takes a Starlette TestClient (an httpx client) directly; the anthropic SDK only
takes an `httpx2.Client`, so its requests are bridged to the TestClient by a MockTransport
(bodies are buffered, which is fine for asserting on whole streams).
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai

from tests.support.fake_engine import FakeEngine, make_client

_HOP_HEADERS = {"content-encoding", "transfer-encoding", "content-length"}


def _bridge(test_client: Any) -> httpx2.Client:
    def handle(request: httpx2.Request) -> httpx2.Response:
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "host"]
        response = test_client.request(
            request.method, str(request.url), headers=headers, content=request.read()
        )
        out = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _HOP_HEADERS]
        return httpx2.Response(response.status_code, headers=out, content=response.content)

    return httpx2.Client(transport=httpx2.MockTransport(handle))


def anthropic_client(engine: FakeEngine, **overrides: Any) -> anthropic.Anthropic:
    test_client = make_client(engine, **overrides)
    return anthropic.Anthropic(
        base_url="http://testserver", api_key="k", http_client=_bridge(test_client), max_retries=0
    )


def openai_client(engine: FakeEngine, **overrides: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url="http://testserver/v1",
        api_key="k",
        http_client=make_client(engine, **overrides),
        max_retries=0,
    )
