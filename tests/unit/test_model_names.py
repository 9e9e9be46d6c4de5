"""Which names reach which served model (gateway/workers/served_models.py), over the real app
and a scripted engine: one /v1/models entry per model, OpenAI's default names, --model-alias,
the 404 / 400 that name the served models, and the base URL."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from msgspec.structs import replace

from gateway.cli import main as cli
from gateway.workers.served_models import UnsupportedName, lookup, served_models
from protocol.messages import Delta, Segment, Usage
from protocol.ready import Capability, TranscriptionInfo
from tests.support.fake_engine import CHAT_MODEL, FakeEngine, accepted, make_client, ready
from tests.support.fake_speech import AUDIO

CAPS = [Capability(c) for c in ("chat", "complete", "speech", "transcribe", "translate")]
ASR = TranscriptionInfo("/models/whisper-tiny", "whisper", 16000, True)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt fake bytes the worker would decode"


def full_engine(**ready_fields) -> FakeEngine:
    """qwen3 (chat) + tiny-tts (--speech-model) + whisper-tiny (--transcription-model)."""
    done = Delta("r", finish_reason="stop", usage=Usage(3, 2), segments=[Segment(0, 0, 1, "x")])
    engine = FakeEngine([accepted(), [Delta("r", text="x", audio=b"\0\0", sample_rate=8000)]])
    engine.script.append([done])
    engine.model_name, engine.model_path = "qwen3", "/models/qwen3"
    fields = {"speech": AUDIO, "transcription": ASR, **ready_fields}
    engine.ready_info = ready(*CAPS, model=engine.model_path, **fields)
    return engine


# -- the served models and their names, without HTTP -----------------------------------------


def test_each_served_model_is_its_own_entry_with_its_own_capabilities():
    models = served_models(full_engine())
    assert [(m.id, m.capabilities) for m in models] == [
        ("qwen3", ("chat", "complete")),
        ("tiny-tts", ("speech",)),
        ("whisper-tiny", ("transcribe", "translate")),
    ]
    assert models[0].main and models[0].max_context == CHAT_MODEL.max_context
    assert models[1].aliases == ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
    assert models[2].aliases == ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
    assert models[0].aliases == ()


def test_a_speech_model_served_alone_is_the_main_model_under_the_servers_name():
    engine = FakeEngine()
    engine.model_name, engine.model_path = "my-tts", "/models/tiny-tts/"
    engine.ready_info = ready(Capability.SPEECH, model="/models/tiny-tts", text=None, speech=AUDIO)
    (model,) = served_models(engine, ["claude-*"])
    assert (model.id, model.capabilities, model.main) == ("my-tts", ("speech",), True)
    assert model.answers_to("tiny-tts") and model.answers_to("/models/tiny-tts")
    assert model.aliases == ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
    assert model.alias_patterns == ("claude-*",)


def test_sections_of_one_checkpoint_are_one_model():
    engine = full_engine(
        speech=replace(AUDIO, model="qwen3", model_path="/models/qwen3"),
        transcription=replace(ASR, model_path="/models/qwen3"),
    )
    (model,) = served_models(engine)
    assert model.capabilities == tuple(str(c) for c in CAPS)
    assert "tts-1" in model.aliases and "whisper-1" in model.aliases


def test_before_the_worker_is_ready_only_the_main_model_is_known():
    engine = full_engine()
    engine.ready_info = None
    (model,) = served_models(engine, ["gpt-*"])
    assert (model.id, model.kinds, model.capabilities) == ("qwen3", (), ())
    assert lookup([model], "gpt-4o", "chat") is model


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("qwen3", "chat", "qwen3"),
        ("/models/qwen3", "chat", "qwen3"),
        ("tiny-tts", "speech", "tiny-tts"),
        ("tts-1-hd", "speech", "tiny-tts"),
        ("gpt-4o-mini-tts", None, "tiny-tts"),
        ("whisper-1", "transcription", "whisper-tiny"),
        ("gpt-4o-transcribe", "transcription", "whisper-tiny"),
        ("claude-sonnet-4-5", "chat", "qwen3"),  # --model-alias 'claude-*'
        ("gpt-4o", "chat", "qwen3"),  # --model-alias 'gpt-4o*'
        ("claude-sonnet-4-5", "speech", "qwen3"),  # an alias reaches the main model only
        ("Claude-3", "chat", None),  # globs are case-sensitive
        ("llama", "chat", None),
    ],
)
def test_names_reach_models_ids_first_then_openai_names_then_aliases(name, kind, expected):
    models = served_models(full_engine(), ["claude-*", "gpt-4o*"])
    found = lookup(models, name, kind)
    assert (found.id if found else None) == expected


def test_a_catch_all_alias_hides_neither_ids_nor_openai_names():
    models = served_models(full_engine(), ["*"])
    assert lookup(models, "tts-1", "speech").id == "tiny-tts"
    assert lookup(models, "whisper-tiny", "transcription").id == "whisper-tiny"
    assert lookup(models, "anything", "chat").id == "qwen3"


def test_an_openai_name_is_free_only_while_no_model_has_it_as_id():
    engine = full_engine()
    engine.model_name = "whisper-1"
    models = served_models(engine)
    assert models[2].aliases == ("gpt-4o-transcribe", "gpt-4o-mini-transcribe")
    assert lookup(models, "whisper-1", "transcription").id == "whisper-1"


def test_two_models_with_one_name_the_one_serving_the_kind_wins():
    engine = full_engine()
    engine.model_name = "tiny-tts"
    models = served_models(engine)
    assert lookup(models, "tiny-tts", "speech").path == "/models/tiny-tts"
    assert lookup(models, "tiny-tts", "chat").path == "/models/qwen3"


def test_the_diarizing_model_is_refused_by_name_even_past_a_catch_all_alias():
    with pytest.raises(UnsupportedName, match="diarization"):
        lookup(served_models(full_engine(), ["*"]), "gpt-4o-transcribe-diarize", None)


# -- over HTTP -------------------------------------------------------------------------------

SPEECH_BODY = {"input": "Hi", "voice": "ryan", "response_format": "pcm"}


def call(client, capability: str, model: str):
    """One request exercising `capability` with `model`."""
    hi = [{"role": "user", "content": "Hi"}]
    if capability == "chat":
        return client.post("/v1/chat/completions", json={"model": model, "messages": hi})
    if capability == "complete":
        return client.post("/v1/completions", json={"model": model, "prompt": "Once"})
    if capability == "speech":
        return client.post("/v1/audio/speech", json={"model": model, **SPEECH_BODY})
    url = {"transcribe": "/v1/audio/transcriptions", "translate": "/v1/audio/translations"}
    return client.post(url[capability], data={"model": model}, files={"file": ("a.wav", WAV)})


def test_every_listed_id_and_alias_works_for_every_listed_capability():
    with make_client(full_engine()) as client:
        cards = client.get("/v1/models").json()["data"]
        assert [c["id"] for c in cards] == ["qwen3", "tiny-tts", "whisper-tiny"]
        for card in cards:
            assert client.get(f"/v1/models/{card['id']}").json() == card
            for name in [card["id"], *card.get("aliases", [])]:
                for capability in card["capabilities"]:
                    response = call(client, capability, name)
                    assert response.status_code == 200, (name, capability, response.text)


@pytest.mark.parametrize(
    ("capability", "model", "names"),
    [
        ("transcribe", "qwen3", "`whisper-tiny`"),
        ("speech", "whisper-tiny", "`tiny-tts`"),
        ("chat", "tiny-tts", "`qwen3`"),
        ("chat", "whisper-1", "`qwen3`"),
        ("complete", "tts-1", "`qwen3`"),
    ],
)
def test_a_model_asked_for_what_it_does_not_do_is_a_400_naming_the_one_that_does(
    capability, model, names
):
    with make_client(full_engine()) as client:
        response = call(client, capability, model)
    error = response.json()["error"]
    assert response.status_code == 400, response.text
    assert (error["param"], error["code"]) == ("model", "model_not_supported")
    assert f"`{model}`" in error["message"] and names in error["message"]


@pytest.mark.parametrize("capability", ["chat", "complete", "speech", "transcribe"])
def test_an_unknown_model_is_a_404_listing_the_served_models(capability):
    with make_client(full_engine()) as client:
        response = call(client, capability, "gpt-5")
    error = response.json()["error"]
    assert response.status_code == 404 and error["code"] == "model_not_found"
    for served in ("`gpt-5`", "`qwen3`", "`tiny-tts`", "`whisper-tiny`", "tts-1", "whisper-1"):
        assert served in error["message"]


def test_model_aliases_reach_the_chat_model_on_every_chat_api():
    engine = full_engine()
    with make_client(engine, model_aliases=("claude-*", "gpt-4o*")) as client:
        chat = call(client, "chat", "gpt-4o-mini")
        assert chat.status_code == 200 and chat.json()["model"] == "qwen3"
        hi = [{"role": "user", "content": "Hi"}]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": hi}
        message = client.post("/v1/messages", json=body)
        assert message.status_code == 200 and message.json()["model"] == "qwen3"
        counted = client.post(
            "/v1/messages/count_tokens", json={"model": "claude-x", "messages": hi}
        )
        assert counted.status_code == 200, counted.text
        response = client.post("/v1/responses", json={"model": "gpt-4o", "input": "Hi"})
        assert response.status_code == 200
        assert call(client, "speech", "gpt-4o-mini-tts").status_code == 200  # still the TTS
        unknown = client.post("/v1/messages", json={**body, "model": "gemini-2.5"})
        assert unknown.status_code == 404 and "`qwen3`" in unknown.json()["error"]["message"]
        card = client.get("/v1/models/claude-opus-4").json()
        assert (card["id"], card["alias_patterns"]) == ("qwen3", ["claude-*", "gpt-4o*"])


def test_get_model_answers_every_name_and_404s_the_rest():
    with make_client(full_engine()) as client:
        assert client.get("/v1/models/tts-1").json()["id"] == "tiny-tts"
        assert client.get("/v1/models//models/whisper-tiny").json()["id"] == "whisper-tiny"
        for name in ("nope", "gpt-4o-transcribe-diarize"):
            response = client.get(f"/v1/models/{name}")
            assert response.status_code == 404
            assert "`qwen3`" in response.json()["error"]["message"]


# -- the base URL ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/v1"])
def test_the_base_url_answers_without_a_key_and_lists_models_only_with_it(path):
    with make_client(full_engine(), api_key="k") as client:
        open_body = client.get(path).json()
        keyed = client.get(path, headers={"x-api-key": "k"}).json()
        head = client.head(path)
        assert client.get("/v1/models").status_code == 401
    assert (open_body["object"], open_body["name"], open_body["status"]) == (
        "server",
        "vllm-omni-mlx",
        "ready",
    )
    assert "models" not in open_body
    assert keyed["models"] == ["qwen3", "tiny-tts", "whisper-tiny"]
    assert head.status_code == 200 and head.content == b""


def test_the_base_url_answers_200_while_health_says_the_worker_is_not_ready():
    engine = full_engine()
    engine.state, engine.reason = "starting", "loading"
    with make_client(engine) as client:
        assert client.get("/health").status_code == 503
        root = client.get("/")
    assert root.status_code == 200 and root.json()["status"] == "starting"


# -- the flag --------------------------------------------------------------------------------


def test_serve_takes_repeated_model_aliases(no_serving, tmp_path):
    args = ["serve", str(tmp_path), "--model-alias", "claude-*", "--model-alias", "gpt-4o*"]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert no_serving[0].config.model_aliases == ("claude-*", "gpt-4o*")


def test_an_empty_model_alias_is_refused(no_serving, tmp_path):
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), "--model-alias", " "])
    assert result.exit_code == 2 and "--model-alias" in result.output
    assert no_serving == []
