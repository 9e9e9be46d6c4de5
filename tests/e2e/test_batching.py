"""Continuous batching through the real server: concurrent requests each equal their solo run.

References are direct mlx-lm calls in this process (greedy), or the same request run alone
through the server (seeded sampling). Speculative decoding and the quantized KV cache run on
servers of their own, compared with `stream_generate` given the same settings.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import mlx.core as mx
import pytest
from mlx_lm import stream_generate
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler

from tests.support import direct
from tests.support.metrics import moved, scrape
from tests.support.server import model_name, openai_client

TOPICS = ["the sea", "prime numbers", "a red bicycle", "Python lists", "winter", "bread"]


def messages(topic: str) -> list[dict]:
    return [{"role": "user", "content": f"Tell me about {topic}."}]


def chat(client, path: str, msgs: list[dict], max_tokens: int, **extra) -> str:
    reply = client.chat.completions.create(
        model=model_name(path), messages=msgs, max_tokens=max_tokens, **extra
    )
    return reply.choices[0].message.content


def test_concurrent_greedy_streams_each_equal_direct_mlx_lm(default_server, qwen3_path):
    client = openai_client(default_server)
    jobs = [(messages(topic), 16 + 8 * i) for i, topic in enumerate(TOPICS)]

    def stream(job) -> str:
        msgs, max_tokens = job
        chunks = client.chat.completions.create(
            model=model_name(qwen3_path),
            messages=msgs,
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    with ThreadPoolExecutor(len(jobs)) as pool:
        texts = list(pool.map(stream, jobs))
    for (msgs, max_tokens), text in zip(jobs, texts, strict=True):
        assert text == direct.greedy_chat(qwen3_path, msgs, max_tokens).text


def stream_text(client, path: str, msgs: list[dict], max_tokens: int, started: threading.Event):
    """A greedy stream's text; `started` is set once its fifth chunk has arrived or the stream
    ended, so a stream that ended early or failed shows its own result, not a wait's timeout."""
    chunks = client.chat.completions.create(
        model=model_name(path), messages=msgs, max_tokens=max_tokens, temperature=0, stream=True
    )
    text, seen = "", 0
    try:
        for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                seen += 1
                if seen == 5:
                    started.set()
    finally:
        started.set()
    return text


def test_a_request_joining_mid_flight_leaves_both_equal_to_direct(default_server, qwen3_path):
    client = openai_client(default_server)
    started = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(stream_text, client, qwen3_path, messages("the sea"), 150, started)
        assert started.wait(180)  # a loaded machine (CI) may hold the first chunks back
        joined = chat(client, qwen3_path, messages("winter"), 24, temperature=0)
        long_text = running.result(120)
    assert joined == direct.greedy_chat(qwen3_path, messages("winter"), 24).text
    assert long_text == direct.greedy_chat(qwen3_path, messages("the sea"), 150).text


def test_a_long_prompt_prefilled_paced_beside_a_stream_leaves_both_equal_to_direct(
    default_server, qwen3_path
):
    """The default server paces prefill (worker/text/prefill_pacing.py): a 1,500-token prompt
    arriving while a stream decodes is prefilled in chunks sized to the stream's decode step,
    computed in the stream's own decode passes (worker/text/fused_generator.py)."""
    client = openai_client(default_server)
    # 1,500 tokens: this checkpoint decodes 200 in a quarter of a second, which on a loaded
    # machine has ended before the long prompt reached the worker, and then nothing is paced
    # beside it. Up to three tries for one where the two overlapped, each with a prompt of its
    # own (the prefix cache would serve a repeated one).
    expected_stream = direct.greedy_chat(qwen3_path, messages("the sea"), 1500).text
    for attempt in range(3):
        text = f"Summarize ({attempt}): " + "the tide comes in. " * 300
        long_messages = [{"role": "user", "content": text}]
        before = scrape(default_server)
        started = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(
                stream_text, client, qwen3_path, messages("the sea"), 1500, started
            )
            assert started.wait(180)  # a loaded machine (CI) may hold the first chunks back
            reply = client.chat.completions.create(
                model=model_name(qwen3_path), messages=long_messages, max_tokens=12, temperature=0
            )
            streamed = running.result(120)
        assert reply.usage.prompt_tokens > 1500
        assert (
            reply.choices[0].message.content
            == direct.greedy_chat(qwen3_path, long_messages, 12).text
        )
        assert streamed == expected_stream
        fused = moved(
            before,
            scrape(default_server),
            "vomlx:prefill_tokens_in_decode_steps_total",
            model_name=model_name(qwen3_path),
        )
        if fused > 0:
            break
    assert fused > 0, "no chunk rode in the stream's decode steps"


def test_each_request_keeps_its_own_sampling_in_a_batch(default_server, qwen3_path):
    client = openai_client(default_server)
    seeded = dict(temperature=1.0, seed=1234)
    alone = chat(client, qwen3_path, messages("bread"), 32, **seeded)
    jobs = [
        (messages("bread"), seeded),
        (messages("winter"), dict(temperature=1.5)),
        (messages("prime numbers"), dict(temperature=0)),
        (messages("the sea"), dict(temperature=1.5, seed=7)),
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        texts = list(pool.map(lambda job: chat(client, qwen3_path, job[0], 32, **job[1]), jobs))
    assert texts[0] == alone
    assert texts[2] == direct.greedy_chat(qwen3_path, messages("prime numbers"), 32).text


def test_aborting_one_stream_leaves_the_others_intact(default_server, qwen3_path):
    client = openai_client(default_server)
    aborted_before = default_server.stats()["requests_aborted"]
    started = threading.Barrier(3)

    def stream(topic: str, stop_after: int | None) -> str:
        chunks = client.chat.completions.create(
            model=model_name(qwen3_path),
            messages=messages(topic),
            # The one the client leaves must still be generating then: greedy, "the sea" runs
            # 4,000 tokens without an EOS, seconds even for this tiny model, where 120 tokens
            # could all be made (and buffered) while the streams wait at the barrier.
            max_tokens=120 if stop_after is None else 4000,
            temperature=0,
            stream=True,
        )
        text, seen = "", 0
        for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                seen += 1
                if seen == 3:
                    started.wait(30)
                if stop_after is not None and seen == stop_after:
                    chunks.response.close()  # the client goes away mid-stream
                    break
        return text

    with ThreadPoolExecutor(3) as pool:
        kept = [pool.submit(stream, t, None) for t in ("winter", "Python lists")]
        pool.submit(stream, "the sea", 6).result(60)
        texts = [f.result(120) for f in kept]
    assert texts[0] == direct.greedy_chat(qwen3_path, messages("winter"), 120).text
    assert texts[1] == direct.greedy_chat(qwen3_path, messages("Python lists"), 120).text
    deadline = time.monotonic() + 10  # the abort reaches the worker after the client left
    while default_server.stats()["requests_aborted"] == aborted_before:
        assert time.monotonic() < deadline, "the stream the client left was never aborted"
        time.sleep(0.05)
    assert default_server.stats()["requests_aborted"] == aborted_before + 1


def test_logprobs_equal_direct_mlx_lm(default_server, qwen3_path):
    model, tokenizer = direct.load_model(qwen3_path)
    prompt = direct.chat_prompt(qwen3_path, messages("winter"))
    steps = list(generate_step(mx.array(prompt), model, max_tokens=8, sampler=make_sampler(0.0)))
    reply = openai_client(default_server).chat.completions.create(
        model=model_name(qwen3_path),
        messages=messages("winter"),
        max_tokens=8,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    content = reply.choices[0].logprobs.content
    assert [c.token for c in content] == [tokenizer.decode([t]) for t, _ in steps]
    for entry, (token, logprobs) in zip(content, steps, strict=True):
        assert entry.logprob == pytest.approx(logprobs[token].item(), abs=1e-3)
        assert len(entry.top_logprobs) == 2 and entry.top_logprobs[0].token == entry.token


def direct_with(path: str, msgs: list[dict], max_tokens: int, **kwargs) -> str:
    model, tokenizer = direct.load_model(path)
    prompt = direct.chat_prompt(path, msgs)
    responses = stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0), **kwargs
    )
    return "".join(r.text for r in responses)


def test_speculative_decoding_equals_direct_mlx_lm_with_the_same_draft(start_server, qwen3_path):
    """The draft runs inside continuous batching (docs/speculation.md): alone and four at once,
    greedy answers equal mlx-lm's speculative generator with the same draft; the model as its
    own draft has (nearly) every proposal accepted."""
    server = start_server(
        qwen3_path, "--draft-model", qwen3_path, "--num-draft-tokens", "3", name="draft"
    )
    try:
        client = openai_client(server)
        draft, _ = direct.load_model(qwen3_path)
        topics = ("the sea", "bread", "rivers", "clocks")
        expected = {
            topic: direct_with(
                qwen3_path, messages(topic), 40, draft_model=draft, num_draft_tokens=3
            )
            for topic in topics
        }
        for topic in topics[:2]:
            assert chat(client, qwen3_path, messages(topic), 40, temperature=0) == expected[topic]
        with ThreadPoolExecutor(4) as pool:
            replies = pool.map(
                lambda t: chat(client, qwen3_path, messages(t), 40, temperature=0), topics
            )
            answers = dict(zip(topics, replies, strict=True))
        assert answers == expected
        stats = server.stats()
        assert stats["spec_decode_num_drafts"] > 0
        # The model as its own draft: its proposals are its greedy tokens, so all but a
        # floating-point near-tie between a batched pass and the draft's own are accepted.
        accepted, proposed = (stats["spec_decode_num_accepted_tokens"],
                              stats["spec_decode_num_draft_tokens"])  # fmt: skip
        assert accepted >= 0.9 * proposed, (accepted, proposed)
    finally:
        server.stop()


def test_a_quantized_kv_cache_equals_direct_mlx_lm_with_the_same_settings(start_server, qwen3_path):
    flags = ["--kv-bits", "8", "--kv-group-size", "32", "--quantized-kv-start", "0"]
    server = start_server(qwen3_path, *flags, name="kv8")
    try:
        client = openai_client(server)
        for topic in ("the sea", "bread"):
            expected = direct_with(
                qwen3_path, messages(topic), 40, kv_bits=8, kv_group_size=32, quantized_kv_start=0
            )
            assert chat(client, qwen3_path, messages(topic), 40, temperature=0) == expected
    finally:
        server.stop()
