"""Clients that hard-code OpenAI's (or Anthropic's) names, against the real server: `tts-1` with
`voice="alloy"`, `whisper-1`, `text-embedding-3-small`, `gpt-image-1`, every id and alias of `models.list()` used for every capability it
lists, `--model-alias 'claude-*'` on `/v1/messages`, the 404 naming the served models, and the
base URL answering without a key."""

from __future__ import annotations

import io

import anthropic
import httpx
import openai
import pytest
from PIL import Image

from tests.support.server import model_name, openai_client
from tests.support.stt_audio import speech_wav
from tests.support.video_direct import HAS_FFMPEG
from worker.tiny_models import ensure_checkpoint

TEXT = "Hello there."
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def client(full_server) -> openai.OpenAI:
    return openai_client(full_server)


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    return speech_wav(tmp_path_factory.mktemp("names") / "hello.wav", "Hello world.")


@pytest.fixture(scope="module")
def aliased(start_server, qwen3_path):
    """The tiny qwen3 with `--model-alias 'claude-*'`: the one extra server of this module."""
    return start_server(qwen3_path, "--model-alias", "claude-*", name="model-alias")


def _speech(client, model: str, voice: str) -> bytes:
    kwargs = {"input": TEXT, "response_format": "pcm", "extra_body": {"seed": 4}}
    return client.audio.speech.create(model=model, voice=voice, **kwargs).content


def test_speech_1_with_alloy_is_the_tts_model_with_the_voice_the_listing_names(
    full_server, client, speech_paths
):
    voices = httpx.get(f"{full_server.url}/v1/audio/voices", headers=full_server.headers).json()
    aliases = {a["name"]: a for a in voices["aliases"]}
    assert aliases["alloy"]["source"] == "default"
    preset = aliases["alloy"]["voice"]
    assert preset in [v["name"] for v in voices["voices"]]
    spoken = _speech(client, "tts-1", "alloy")
    assert spoken and spoken == _speech(client, model_name(speech_paths["tts"]), preset)


def test_whisper_1_is_the_speech_recognition_model(client, speech_paths, wav):
    def text(model: str) -> str:
        with wav.open("rb") as f:
            return client.audio.transcriptions.create(model=model, file=f, language="en").text

    assert text("whisper-1") == text(model_name(speech_paths["asr"]))


def _use(client, capability: str, model: str, wav) -> None:
    """One call of `capability` with `model`, by the openai SDK; raises unless it works."""
    if capability == "chat":
        reply = client.chat.completions.create(model=model, messages=HI, max_tokens=2)
        assert reply.choices
        assert client.responses.create(model=model, input="Hi", max_output_tokens=16).output
    elif capability == "complete":
        assert client.completions.create(model=model, prompt="Once", max_tokens=2).choices
    elif capability == "speech":
        assert _speech(client, model, "alloy")
    elif capability == "embed":
        assert len(client.embeddings.create(model=model, input=["Hi", "there"]).data) == 2
    elif capability in ("rerank", "score"):
        body = (
            {"model": model, "query": "Hi", "documents": ["Hello", "Bye"]}
            if capability == "rerank"
            else {"model": model, "text_1": "Hi", "text_2": ["Hello", "Bye"]}
        )
        answer = client.post(f"/{capability}", body=body, cast_to=httpx.Response).json()
        assert len(answer["results" if capability == "rerank" else "data"]) == 2
    elif capability == "image_out":
        steps = {"seed": 1, "num_inference_steps": 2}
        picture = client.images.generate(
            model=model, prompt="a fox", size="32x32", extra_body=steps
        )
        assert picture.data[0].b64_json
    elif capability == "image_edit":
        png = io.BytesIO()
        Image.new("RGB", (32, 32), "teal").save(png, format="PNG")
        edited = client.images.edit(
            model=model, image=("a.png", png.getvalue(), "image/png"), prompt="a fox",
            extra_body={"seed": 1, "num_inference_steps": 2},
        )  # fmt: skip
        assert edited.data[0].b64_json
    elif capability == "video_out":
        video = client.videos.create_and_poll(
            model=model, prompt="a fox", size="32x32",
            extra_body={"seed": 1, "num_inference_steps": 2}, poll_interval_ms=100,
        )  # fmt: skip
        assert video.status == "completed", video.error
    elif capability in ("transcribe", "translate"):
        create = client.audio.transcriptions.create
        if capability == "translate":
            create = client.audio.translations.create
        with wav.open("rb") as f:
            assert isinstance(create(model=model, file=f).text, str)
    else:
        pytest.fail(f"no call for the capability {capability!r} of {model}")


def test_every_listed_id_and_alias_works_for_every_capability_it_lists(
    full_server, client, qwen3_path, speech_paths, embedding_path, wav
):
    models = client.models.list().data
    ids = [m.id for m in models]
    image = str(ensure_checkpoint("z_image", "tiny"))
    paths = [qwen3_path, speech_paths["tts"], speech_paths["asr"], embedding_path, image]
    tasks = ["chat", "speech", "transcription", "embedding", "image"]
    if HAS_FFMPEG:  # (the full server serves video only with it)
        paths.append(str(ensure_checkpoint("minimax_h3", "tiny")))
        tasks.append("video")
    assert ids == [model_name(p) for p in paths]
    # what a UI reads to list chat models only
    assert [m.model_dump()["task"] for m in models] == tasks
    for model in models:
        card = model.model_dump()
        assert client.models.retrieve(model.id).model_dump() == card
        for name in [model.id, *card.get("aliases", [])]:
            assert client.models.retrieve(name).id == model.id
            for capability in card["capabilities"]:
                _use(client, capability, name, wav)


def test_the_chat_model_does_not_transcribe_and_says_which_model_does(client, qwen3_path, wav):
    with wav.open("rb") as f, pytest.raises(openai.BadRequestError) as err:
        client.audio.transcriptions.create(model=model_name(qwen3_path), file=f)
    assert "whisper-1" in err.value.message


def test_a_claude_name_reaches_the_chat_model_when_aliased(aliased, qwen3_path):
    claude = anthropic.Anthropic(
        base_url=aliased.url, api_key=aliased.api_key, max_retries=0, timeout=120
    )
    reply = claude.messages.create(model="claude-sonnet-4-5", max_tokens=4, messages=HI)
    assert reply.model == model_name(qwen3_path) and reply.content
    chat = openai_client(aliased).chat.completions.create(
        model="claude-3-haiku", messages=HI, max_tokens=2
    )
    assert chat.model == model_name(qwen3_path)
    listed = openai_client(aliased).models.list().data
    assert listed[0].model_dump()["alias_patterns"] == ["claude-*"]


def test_an_unknown_name_is_a_404_naming_the_served_model(aliased, qwen3_path):
    claude = anthropic.Anthropic(
        base_url=aliased.url, api_key=aliased.api_key, max_retries=0, timeout=120
    )
    with pytest.raises(anthropic.NotFoundError) as err:
        claude.messages.create(model="gpt-4o", max_tokens=4, messages=HI)
    assert f"`{model_name(qwen3_path)}`" in str(err.value)
    with pytest.raises(openai.NotFoundError) as err:
        openai_client(aliased).chat.completions.create(model="gpt-4o", messages=HI, max_tokens=2)
    assert f"`{model_name(qwen3_path)}`" in err.value.message


def test_the_base_url_answers_without_a_key(full_server):
    assert httpx.head(f"{full_server.url}/", timeout=10).status_code == 200
    body = httpx.get(f"{full_server.url}/", timeout=10).json()
    assert (body["object"], body["name"], body["status"]) == ("server", "vllm-omni-mlx", "ready")
    assert "models" not in body  # the ids need the key
    keyed = httpx.get(f"{full_server.url}/v1", headers=full_server.headers, timeout=10).json()
    assert len(keyed["models"]) == (6 if HAS_FFMPEG else 5)
