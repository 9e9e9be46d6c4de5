"""Many models behind one gateway (`serve --models FILE`), against the real processes: each
model in its own worker, loaded on demand, evicted least recently used, pinned, unloaded when
idle, isolated from the others' crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import httpx
import pytest

from tests.support import direct
from tests.support.server import CLI, openai_client
from tests.support.stt_audio import speech_wav
from worker.tiny_models.adapter import ensure_lora_adapter

MESSAGES = [{"role": "user", "content": "Name three prime numbers."}]
LONG = {"messages": [{"role": "user", "content": "Tell me everything."}], "max_tokens": 3000}


def _write(tmp_path_factory, name: str, text: str) -> str:
    path = tmp_path_factory.mktemp("models") / f"{name}.yaml"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def pool_paths(qwen3_path, llama_path, speech_paths) -> dict[str, str]:
    adapter = str(ensure_lora_adapter(qwen3_path))
    return {"chat": qwen3_path, "llama": llama_path, "adapter": adapter, **speech_paths}


@pytest.fixture(scope="module")
def pool_server(start_server, tmp_path_factory, pool_paths):
    text = f"""\
models:
  - id: chat
    path: {pool_paths["chat"]}
    aliases: [gpt-4o-mini]
    options: {{prefix_cache_bytes: 0}}
  - id: llama
    path: {pool_paths["llama"]}
    kind: chat
  - id: voice
    path: {pool_paths["tts"]}
    kind: speech
    aliases: [tts-1]
  - id: ears
    path: {pool_paths["asr"]}
    kind: transcription
    aliases: [whisper-1]
  - id: chat-lora
    path: {pool_paths["chat"]}
    adapter: {pool_paths["adapter"]}
"""
    return start_server("--models", _write(tmp_path_factory, "pool", text), name="pool")


def _cards(server) -> dict[str, dict]:
    r = httpx.get(f"{server.url}/v1/models", headers=server.headers, timeout=10)
    r.raise_for_status()
    return {card["id"]: card for card in r.json()["data"]}


def _wait(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _admin(server, action: str, **body) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/admin/models/{action}",
        json=body,
        headers=server.admin_headers,
        timeout=120,
    )


def test_every_model_is_listed_unloaded_until_a_request_needs_it(start_server, tmp_path_factory,
                                                                    qwen3_path):  # fmt: skip
    text = f"models:\n  - id: lazy\n    path: {qwen3_path}\n    aliases: [also-lazy]\n"
    server = start_server("--models", _write(tmp_path_factory, "lazy", text), name="lazy")
    try:
        card = _cards(server)["lazy"]
        assert card["state"] == "unloaded" and card["aliases"] == ["also-lazy"]
        assert "worker_pid" not in card and card["estimated_bytes"] > 0
        health = server.health().json()
        assert health["status"] == "ok" and health["models"]["lazy"]["state"] == "unloaded"
        reply = openai_client(server).chat.completions.create(
            model="also-lazy", messages=MESSAGES, max_tokens=4, temperature=0
        )
        assert reply.model == "lazy" and reply.usage.completion_tokens == 4
        card = _cards(server)["lazy"]
        assert card["state"] == "ready" and card["capabilities"] == ["chat", "complete"]
        assert card["resident_bytes"] > 0 and card["worker_pid"] > 0
    finally:
        server.stop()


@pytest.mark.parametrize(("name", "model"), [("chat", "chat"), ("gpt-4o-mini", "chat"),
                                             ("llama", "llama")])  # fmt: skip
def test_each_chat_model_answers_under_its_names_as_direct_mlx_lm(pool_server, pool_paths,
                                                                 name, model):  # fmt: skip
    expected = direct.greedy_chat(pool_paths[model], MESSAGES, 24)
    reply = openai_client(pool_server).chat.completions.create(
        model=name, messages=MESSAGES, max_tokens=24, temperature=0
    )
    assert reply.model == model
    direct.assert_chat_equals(reply, expected, 24)


def test_a_model_with_a_lora_adapter_answers_as_mlx_lm_with_that_adapter(pool_server, pool_paths):
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = load(pool_paths["chat"], adapter_path=pool_paths["adapter"])
    prompt = direct.chat_prompt(pool_paths["chat"], MESSAGES)
    steps = list(
        stream_generate(model, tokenizer, prompt, max_tokens=16, sampler=make_sampler(0.0))
    )
    reply = openai_client(pool_server).chat.completions.create(
        model="chat-lora", messages=MESSAGES, max_tokens=16, temperature=0
    )
    assert reply.choices[0].message.content == "".join(step.text for step in steps)
    assert reply.usage.completion_tokens == len(steps) == 16
    base = direct.greedy_chat(pool_paths["chat"], MESSAGES, 16)
    assert reply.choices[0].message.content != base.text  # the adapter is applied


def test_the_speech_models_answer_under_their_aliases(pool_server, tmp_path):
    client = openai_client(pool_server)
    speech = client.audio.speech.create(
        model="tts-1", input="Hello there.", voice="vivian", response_format="wav"
    )
    assert speech.content[:4] == b"RIFF" and len(speech.content) > 1000
    wav = speech_wav(tmp_path / "hi.wav", "Hello there.")
    with open(wav, "rb") as audio:
        text = client.audio.transcriptions.create(model="whisper-1", file=audio)
    assert isinstance(text.text, str)
    cards = _cards(pool_server)
    assert cards["voice"]["capabilities"] == ["speech"] and cards["voice"]["kind"] == "speech"
    assert (
        "transcribe" in cards["ears"]["capabilities"] and cards["ears"]["kind"] == "transcription"
    )


def test_a_model_asked_for_what_it_does_not_do_is_a_400_and_unknown_names_a_404(pool_server):
    client = openai_client(pool_server)
    with pytest.raises(Exception) as caught:
        client.chat.completions.create(model="voice", messages=MESSAGES, max_tokens=2)
    assert caught.value.status_code == 400 and "does not generate text" in str(caught.value)
    with pytest.raises(Exception) as caught:
        client.chat.completions.create(model="nobody", messages=MESSAGES, max_tokens=2)
    assert caught.value.status_code == 404 and "`chat`" in str(caught.value)


def _stream(server, model: str, body: dict, out: dict) -> None:
    events = []
    with httpx.stream(
        "POST", f"{server.url}/v1/chat/completions", headers=server.headers, timeout=120,
        json={"model": model, "stream": True, "temperature": 0, **body},
    ) as r:  # fmt: skip
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append((time.monotonic(), line[6:]))
    out[model] = events


def _text_of(events) -> str:
    chunks = [json.loads(e) for _, e in events if e != "[DONE]" and '"choices"' in e]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_two_models_stream_at_once_and_a_killed_one_fails_alone(pool_server, pool_paths):
    for name in ("chat", "llama"):  # both loaded first: the kill must hit a running stream
        openai_client(pool_server).chat.completions.create(model=name, messages=MESSAGES,
                                                           max_tokens=1)  # fmt: skip
    chat_pid = _cards(pool_server)["chat"]["worker_pid"]
    llama_pid = _cards(pool_server)["llama"]["worker_pid"]
    out: dict = {}
    llama_body = {"messages": MESSAGES, "max_tokens": 200}
    threads = [
        threading.Thread(target=_stream, args=(pool_server, "chat", LONG, out)),
        threading.Thread(target=_stream, args=(pool_server, "llama", llama_body, out)),
    ]
    for t in threads:
        t.start()
    time.sleep(1.0)  # both generating
    killed_at = time.monotonic()
    os.kill(chat_pid, signal.SIGKILL)
    for t in threads:
        t.join(120)
    chat, llama = out["chat"], out["llama"]
    assert chat[-1][1] == "[DONE]" and '"error"' in chat[-2][1]
    assert chat[-1][0] - killed_at < 2.0
    assert llama[-1][1] == "[DONE]" and not any('"error"' in e for _, e in llama)
    expected = direct.greedy_chat(pool_paths["llama"], MESSAGES, 200)
    assert _text_of(llama) == expected.text  # untouched by the other worker's death
    cards = _wait(lambda: (c := _cards(pool_server))["chat"]["state"] == "ready" and c)
    assert cards["chat"]["worker_pid"] != chat_pid and cards["llama"]["worker_pid"] == llama_pid
    reply = openai_client(pool_server).chat.completions.create(
        model="chat", messages=MESSAGES, max_tokens=3
    )
    assert reply.usage.completion_tokens == 3


def test_admin_unload_and_pin_and_the_cli(pool_server):
    assert _admin(pool_server, "load", model="llama").json()["result"]["state"] == "ready"
    assert _admin(pool_server, "unload", model="llama").json()["state"] == "unloaded"
    assert _cards(pool_server)["llama"]["state"] == "unloaded"
    pinned = _admin(pool_server, "pin", model="llama").json()
    assert pinned["pinned"] is True and pinned["state"] == "unloaded"  # pinning loads nothing
    unknown = _admin(pool_server, "unload", model="nobody")
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "model"
    run = subprocess.run(
        [CLI, "models", "pin", "llama", "--unpin", "--url", pool_server.url,
         "--admin-key", pool_server.admin_key],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["pinned"] is False
    stats = httpx.get(f"{pool_server.url}/v1/admin/stats", headers=pool_server.headers).json()
    assert set(stats["models"]) == {"chat", "llama", "voice", "ears", "chat-lora"}


def test_the_least_recently_used_model_is_evicted_and_a_pinned_one_is_not(
    start_server, tmp_path_factory, qwen3_path, llama_path
):
    text = f"""\
max_loaded_models: 2
models:
  - {{id: a, path: {qwen3_path}, options: {{prefix_cache_bytes: 0}}}}
  - {{id: b, path: {llama_path}, options: {{prefix_cache_bytes: 0}}}}
  - {{id: c, path: {qwen3_path}, options: {{prefix_cache_bytes: 0}}}}
"""
    server = start_server("--models", _write(tmp_path_factory, "lru", text), name="lru")
    try:
        client = openai_client(server)

        def use(name: str) -> None:
            client.chat.completions.create(model=name, messages=MESSAGES, max_tokens=1)

        def loaded() -> list[str]:
            return sorted(i for i, c in _cards(server).items() if c["state"] == "ready")

        use("a"), use("b"), use("c")
        assert loaded() == ["b", "c"]
        assert _admin(server, "pin", model="b").status_code == 200
        use("a")
        assert loaded() == ["a", "b"]  # c, not the pinned b (used before it)
    finally:
        server.stop()


def test_an_idle_model_is_unloaded(start_server, tmp_path_factory, qwen3_path):
    text = f"idle_unload_seconds: 1.5\nmodels:\n  - {{id: idle, path: {qwen3_path}}}\n"
    server = start_server("--models", _write(tmp_path_factory, "idle", text), name="idle")
    try:
        openai_client(server).chat.completions.create(model="idle", messages=MESSAGES,
                                                      max_tokens=1)  # fmt: skip
        pid = _cards(server)["idle"]["worker_pid"]
        _wait(lambda: _cards(server)["idle"]["state"] == "unloaded", timeout=15)
        _wait(lambda: not os.path.exists(f"/proc/{pid}"), timeout=15)
    finally:
        server.stop()


def test_a_bad_models_file_is_refused_at_start_naming_the_line_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - id: a\n    path: /a\n    kind: movie\n")
    run = subprocess.run([CLI, "serve", "--models", str(bad), "--port", "0"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode != 0
    assert (
        f"{bad}:4: models[0].kind: must be one of chat, speech, transcription, embed" in run.stderr
    )


def test_metrics_are_labelled_per_model(pool_server):
    from prometheus_client.parser import text_string_to_metric_families

    openai_client(pool_server).chat.completions.create(
        model="llama", messages=MESSAGES, max_tokens=3
    )
    text = httpx.get(f"{pool_server.url}/metrics", headers=pool_server.headers, timeout=30).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("vllm:generation_tokens_total", (("model_name", "llama"),))] >= 3
    assert samples[("vomlx:worker_state", (("model_name", "llama"), ("state", "ready")))] == 1
    assert ("vllm:num_requests_running", (("model_name", "voice"),)) in samples
    assert ("vllm:prefix_cache_queries_total", (("model_name", "llama"),)) in samples
