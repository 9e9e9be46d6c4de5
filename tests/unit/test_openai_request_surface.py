"""Every request field the official OpenAI document defines is known to the server.

For each served operation, each top-level property of its request schema in the vendored
document (tests/data/openai-openapi) is sent to the real app: the server may honour it, accept
it, or refuse it with a 400 that says it is not supported here (`unsupported_parameter`), but
never answer that it does not exist (`unknown_parameter`). The recorded field lists below must
equal the document's, so a document update fails here and shows what the API changed.
"""

from __future__ import annotations

import pytest

from protocol.messages import Delta, Segment, Usage
from protocol.ready import (
    Capability,
    EmbeddingInfo,
    ImageInfo,
    SpeechInfo,
    TranscriptionInfo,
    VideoInfo,
    Voice,
)
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready
from tests.support.openai_spec import request_properties

# The request fields of the vendored document (openai-openapi f85dbe2, 2026-08-21).
RECORDED = {
    "CreateChatCompletionRequest": {
        "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
        "max_completion_tokens", "max_tokens", "messages", "metadata", "modalities", "model",
        "moderation", "n", "parallel_tool_calls", "prediction", "presence_penalty",
        "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "reasoning_effort",
        "response_format", "safety_identifier", "seed", "service_tier", "stop", "store",
        "stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs",
        "top_p", "user", "verbosity", "web_search_options",
    },
    "CreateCompletionRequest": {
        "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "model",
        "n", "presence_penalty", "prompt", "seed", "stop", "stream", "stream_options", "suffix",
        "temperature", "top_p", "user",
    },
    "CreateResponse": {
        "background", "context_management", "conversation", "include", "input", "instructions",
        "max_output_tokens", "max_tool_calls", "metadata", "model", "moderation",
        "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
        "prompt_cache_options", "prompt_cache_retention", "reasoning", "safety_identifier",
        "service_tier", "store", "stream", "stream_options", "temperature", "text",
        "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
    },
    "CreateSpeechRequest": {
        "input", "instructions", "model", "response_format", "speed", "stream_format", "voice",
    },
    "CreateTranscriptionRequest": {
        "chunking_strategy", "file", "include", "keywords", "known_speaker_names",
        "known_speaker_references", "language", "languages", "model", "prompt",
        "response_format", "stream", "temperature", "timestamp_granularities",
    },
    "CreateTranslationRequest": {"file", "model", "prompt", "response_format", "temperature"},
    "CreateEmbeddingRequest": {"dimensions", "encoding_format", "input", "model", "user"},
    "CreateImageRequest": {
        "background", "model", "moderation", "n", "output_compression", "output_format",
        "partial_images", "prompt", "quality", "response_format", "size", "stream", "style",
        "user",
    },
    "CreateImageEditRequest": {
        "background", "image", "input_fidelity", "mask", "model", "n", "output_compression",
        "output_format", "partial_images", "prompt", "quality", "response_format", "size",
        "stream", "user",
    },
    "CreateVideoJsonBody": {"input_reference", "model", "prompt", "seconds", "size"},
    "CreateVideoMultipartBody": {"input_reference", "model", "prompt", "seconds", "size"},
}  # fmt: skip

HELLO = [{"role": "user", "content": "Hi"}]
JSON_OPERATIONS = {
    "CreateChatCompletionRequest": ("/v1/chat/completions", {"model": "tiny", "messages": HELLO}),
    "CreateCompletionRequest": ("/v1/completions", {"model": "tiny", "prompt": "Once"}),
    "CreateResponse": ("/v1/responses", {"model": "tiny", "input": "Hi"}),
    "CreateSpeechRequest": ("/v1/audio/speech", {"model": "tiny", "input": "Hi", "voice": "ryan"}),
    "CreateEmbeddingRequest": ("/v1/embeddings", {"model": "tiny", "input": "Hi"}),
    "CreateImageRequest": ("/v1/images/generations", {"model": "tiny", "prompt": "a fox"}),
    "CreateVideoJsonBody": ("/v1/videos", {"model": "tiny", "prompt": "a fox"}),
}
FORM_OPERATIONS = {
    "CreateTranscriptionRequest": "/v1/audio/transcriptions",
    "CreateTranslationRequest": "/v1/audio/translations",
}
IMAGE = ImageInfo("/models/tiny", "z_image", 9, 0.0, 2, 100, 16, 2048, 16, True, True)
VIDEO = VideoInfo(
    "/models/tiny", "minimax_h3", 30, 2, 100, 64, 32, 32, 768 * 1344, 4.0, 5.0, 15.0, 24.0, 4096
)
AUDIO = SpeechInfo(
    "tiny", "/models/tiny", "qwen3_tts", [Voice("ryan")], False, False, False, True, [], False,
    True, 8000,
)  # fmt: skip


def _engine() -> FakeEngine:
    done = Delta(
        "r", finish_reason="stop", usage=Usage(3, 2), segments=[Segment(0, 0, 1, "x")],
        embeddings=[b"\0\0\x80?"],
    )  # fmt: skip
    engine = FakeEngine([accepted(), [Delta("r", text="x", audio=b"\0\0", sample_rate=8000)]])
    engine.script.append([done])
    capabilities = [
        Capability(c)
        for c in (
            "chat", "complete", "speech", "transcribe", "translate", "embed", "image_out",
            "image_edit", "video_out",
        )
    ]  # fmt: skip
    asr = TranscriptionInfo("/models/tiny", "whisper", 16000, True)
    embed = EmbeddingInfo("/models/tiny", "mlx-embeddings", "bert", 1, "mean", True, 16, 8, 99)
    engine.ready_info = ready(
        *capabilities, speech=AUDIO, transcription=asr, embedding=embed, image=IMAGE,
        video=VIDEO,
    )  # fmt: skip
    return engine


def _refusal(response) -> str | None:
    """The error code of a 400 (None for any other answer)."""
    if response.status_code != 400:
        return None
    return response.json()["error"]["code"]


@pytest.mark.parametrize("schema", sorted(RECORDED))
def test_the_documents_request_fields_are_the_recorded_ones(schema):
    assert request_properties(schema) == RECORDED[schema]


@pytest.mark.parametrize(
    ("schema", "field"),
    [(s, f) for s in sorted(JSON_OPERATIONS) for f in sorted(RECORDED[s])],
)
def test_every_documented_json_field_is_known(schema, field):
    path, body = JSON_OPERATIONS[schema]
    with make_client(_engine()) as client:
        # null is a value every field can be sent with: only the name is on trial here.
        response = client.post(path, json={**body, field: body.get(field)})
    assert _refusal(response) != "unknown_parameter", response.text


@pytest.mark.parametrize(
    ("schema", "field"),
    [(s, f) for s in sorted(FORM_OPERATIONS) for f in sorted(RECORDED[s]) if f != "file"],
)
def test_every_documented_form_field_is_known(schema, field):
    data = {"model": "tiny", field: "tiny" if field == "model" else "x"}
    with make_client(_engine()) as client:
        response = client.post(
            FORM_OPERATIONS[schema], data=data, files={"file": ("a.wav", b"RIFF", "audio/wav")}
        )
    assert _refusal(response) != "unknown_parameter", response.text


@pytest.mark.parametrize("field", sorted(RECORDED["CreateImageEditRequest"] - {"image"}))
def test_every_documented_image_edit_field_is_known(field):
    data = {"model": "tiny", "prompt": "a fox", field: "tiny" if field == "model" else "x"}
    with make_client(_engine()) as client:
        response = client.post(
            "/v1/images/edits", data=data, files={"image": ("a.png", b"\x89PNG", "image/png")}
        )
    assert _refusal(response) != "unknown_parameter", response.text


@pytest.mark.parametrize("field", sorted(RECORDED["CreateVideoMultipartBody"]))
def test_every_documented_video_form_field_is_known(field):
    form = {"model": "tiny", "prompt": "a fox", field: "tiny" if field == "model" else "5"}
    with make_client(_engine()) as client:
        response = client.post(
            "/v1/videos", files={name: (None, value) for name, value in form.items()}
        )
    assert _refusal(response) != "unknown_parameter", response.text


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/chat/completions", {"messages": HELLO}, "moderation"),
        ("/v1/responses", {"input": "Hi"}, "moderation"),
        ("/v1/responses", {"input": "Hi"}, "conversation"),
        ("/v1/responses", {"input": "Hi"}, "prompt"),
        ("/v1/responses", {"input": "Hi"}, "context_management"),
    ],
)
def test_a_field_that_cannot_be_served_here_is_refused_as_unsupported(path, body, field):
    value = {
        "moderation": {"model": "omni-moderation-latest"},
        "conversation": "conv_123",
        "prompt": {"id": "pmpt_123"},
        "context_management": [{"type": "compaction", "compact_threshold": 2000}],
    }[field]
    with make_client(_engine()) as client:
        response = client.post(path, json={"model": "tiny", **body, field: value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", field)
    assert "not supported by this server" in error["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": HELLO}),
        ("/v1/responses", {"input": "Hi", "max_tool_calls": 3}),
    ],
)
def test_prompt_cache_options_and_max_tool_calls_are_accepted(path, body):
    options = {"ttl": "30m", "mode": "implicit"}
    with make_client(_engine()) as client:
        response = client.post(
            path, json={"model": "tiny", **body, "prompt_cache_options": options}
        )
    assert response.status_code == 200, response.text
