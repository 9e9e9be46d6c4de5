"""GET /metrics on the real server: behind the key, Prometheus text, vLLM's names, and counters
that move by exactly what one request's usage says (the tests of a session run one at a time,
so nothing else moves them meanwhile)."""

from __future__ import annotations

import httpx

from tests.support.metrics import moved, scrape
from tests.support.server import model_name, openai_client

HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
)


def test_metrics_need_the_api_key(default_server):
    assert httpx.get(f"{default_server.url}/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer wrong"}
    assert httpx.get(f"{default_server.url}/metrics", headers=wrong, timeout=10).status_code == 401


def test_metrics_describe_the_engine(default_server, qwen3_path):
    got = scrape(default_server)
    name = model_name(qwen3_path)
    assert got[("vomlx:worker_state", (("model_name", name), ("state", "ready")))] == 1
    assert got[("vllm:num_requests_running", (("model_name", name),))] == 0
    assert got[("vllm:num_requests_waiting", (("model_name", name),))] == 0
    assert got[("vomlx:model_load_seconds_count", (("model_name", name),))] >= 1
    # no TTS model is served: no speech counter is made up for the chat model
    assert not any(key[0] == "vomlx:speech_seconds_total" for key in got)


def _check_one_request(before, after, name: str, usage, reason: str) -> None:
    m = {"model_name": name}
    assert moved(before, after, "vllm:prompt_tokens_total", **m) == usage.prompt_tokens
    assert moved(before, after, "vllm:generation_tokens_total", **m) == usage.completion_tokens
    assert moved(before, after, "vllm:request_success_total", finished_reason=reason, **m) == 1
    for histogram in HISTOGRAMS:
        assert moved(before, after, f"{histogram}_count", **m) == 1, histogram
    # one inter-token interval per worker step with tokens after the first: a step returns
    # one token, plus the proposals speculation accepted in it (all returned here: the
    # requests end by max_tokens, which bounds what a sequence may propose)
    itl = moved(before, after, "vllm:inter_token_latency_seconds_count", **m)
    accepted = moved(before, after, "vllm:spec_decode_num_accepted_tokens_total", **m)
    assert itl == usage.completion_tokens - 1 - accepted


def test_counters_move_by_one_chat_requests_usage(default_server, qwen3_path):
    client = openai_client(default_server)
    name = model_name(qwen3_path)
    messages = [{"role": "user", "content": "Count the metrics, please."}]

    before = scrape(default_server)
    reply = client.chat.completions.create(
        model=name, messages=messages, max_tokens=6, temperature=0
    )
    after = scrape(default_server)
    _check_one_request(before, after, name, reply.usage, reply.choices[0].finish_reason)

    stream = client.chat.completions.create(
        model=name,
        messages=[{"role": "user", "content": "Now stream them."}],
        max_tokens=5,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    usage = chunks[-1].usage
    reason = next(
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    )
    final = scrape(default_server)
    _check_one_request(after, final, name, usage, reason)


def test_a_repeated_prompt_counts_prefix_cache_hits_in_tokens(default_server, qwen3_path):
    client = openai_client(default_server)
    name = model_name(qwen3_path)
    messages = [{"role": "user", "content": "A prompt said twice is served from the cache."}]
    m = {"model_name": name}
    client.chat.completions.create(model=name, messages=messages, max_tokens=3, temperature=0)
    before = scrape(default_server)
    again = client.chat.completions.create(
        model=name, messages=messages, max_tokens=3, temperature=0
    )
    after = scrape(default_server)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached > 0
    assert moved(before, after, "vllm:prefix_cache_hits_total", **m) == cached
    assert moved(before, after, "vllm:prefix_cache_queries_total", **m) == again.usage.prompt_tokens
