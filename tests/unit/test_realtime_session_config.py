"""The realtime session's settings: session.update in the GA and the beta shapes, each field
honoured or refused by name, and the session object written in the client's interface."""

from __future__ import annotations

import pytest

from gateway.api.realtime import config as cfg
from gateway.api.realtime.names import BETA, GA
from gateway.api.realtime.wire import EventError


def updated(body: dict, fields=cfg.SESSION_FIELDS) -> cfg.SessionConfig:
    config = cfg.SessionConfig(model="m")
    cfg.apply(config, body, "session", fields)
    return config


def test_the_ga_shape_sets_every_honoured_field():
    config = updated({
        "type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"],
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000},
                      "transcription": {"model": "whisper-1", "language": "en"},
                      "turn_detection": {"type": "server_vad", "threshold": 0.7,
                                         "prefix_padding_ms": 100, "silence_duration_ms": 800,
                                         "create_response": False}},
            "output": {"voice": "echo", "speed": 1.5},
        },
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"}, "max_output_tokens": 50,
    })  # fmt: skip
    assert config.instructions == "Be brief." and not config.audio_out
    assert config.transcription == {"model": "whisper-1", "language": "en"}
    turn = config.turn_detection
    assert turn is not None and not turn.create_response and turn.interrupt_response
    assert (turn.settings.threshold, turn.settings.prefix_padding_ms,
            turn.settings.silence_duration_ms) == (0.7, 100, 800)  # fmt: skip
    assert (config.voice, config.speed, config.max_output_tokens) == ("echo", 1.5, 50)
    assert config.tools == [{"type": "function",
                             "function": {"name": "f", "parameters": {"type": "object"}}}]  # fmt: skip
    assert config.tool_choice == {"type": "function", "function": {"name": "f"}}
    session = cfg.session_object(config, "sess_1", GA)
    assert session["audio"]["input"]["turn_detection"]["threshold"] == 0.7
    assert session["output_modalities"] == ["text"] and session["max_output_tokens"] == 50
    assert session["tools"] == [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    assert session["tool_choice"] == {"type": "function", "name": "f"}


def test_the_beta_shape_and_its_session_object():
    config = updated({"modalities": ["text", "audio"], "voice": "alloy", "temperature": 0.9,
                      "input_audio_format": "pcm16", "turn_detection": None,
                      "input_audio_transcription": {"model": "whisper-1"},
                      "max_response_output_tokens": "inf"})  # fmt: skip
    assert config.audio_out and config.turn_detection is None and config.temperature == 0.9
    session = cfg.session_object(config, "sess_1", BETA)
    assert session["modalities"] == ["text", "audio"] and session["turn_detection"] is None
    assert session["input_audio_transcription"] == {"model": "whisper-1"}
    assert session["max_response_output_tokens"] == "inf"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}},
         "session.audio.input.turn_detection.type"),
        ({"audio": {"input": {"turn_detection": {"threshold": 2}}}},
         "session.audio.input.turn_detection.threshold"),
        ({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
         "session.audio.input.format"),
        ({"output_audio_format": "g711_ulaw"}, "session.output_audio_format"),
        ({"audio": {"input": {"noise_reduction": {"type": "near_field"}}}},
         "session.audio.input.noise_reduction"),
        ({"tools": [{"type": "mcp", "server_label": "x"}]}, "session.tools[0].type"),
        ({"tools": [{"type": "function"}]}, "session.tools[0].name"),
        ({"tool_choice": "sometimes"}, "session.tool_choice"),
        ({"output_modalities": ["video"]}, "session.output_modalities"),
        ({"truncation": "auto"}, "session.truncation"),
        ({"model": "other"}, "session.model"),
        ({"type": "transcription"}, "session.type"),
        ({"audio": {"output": {"tone": "x"}}}, "session.audio.output.tone"),
        ({"max_output_tokens": 0}, "session.max_output_tokens"),
    ],
)  # fmt: skip
def test_what_cannot_be_honoured_is_refused_by_name(body, param):
    with pytest.raises(EventError) as error:
        updated(body)
    assert error.value.param == param


def test_a_response_may_not_change_the_input_side():
    with pytest.raises(EventError) as error:
        updated({"audio": {"input": {"turn_detection": None}}}, cfg.RESPONSE_FIELDS)
    assert error.value.param == "session.audio.input"
    assert updated({"audio": {"output": {"voice": "ash"}}}, cfg.RESPONSE_FIELDS).voice == "ash"


def test_fields_without_local_meaning_are_accepted():
    config = updated({"tracing": "auto", "id": "sess_x", "object": "realtime.session",
                      "include": [], "prompt": None, "truncation": "disabled"})  # fmt: skip
    assert config == cfg.SessionConfig(model="m")
