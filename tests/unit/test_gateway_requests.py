"""Parsing of OpenAI chat / completions bodies: the field policy, messages, prompts."""

from __future__ import annotations

import pytest

from gateway.api.chat_completions.requests import parse_completion
from gateway.generation.chat_body import parse_chat
from gateway.http.errors import APIError

USER = [{"role": "user", "content": "hi"}]


def chat(**fields):
    return parse_chat({"model": "tiny", "messages": USER, **fields}, default_max_tokens=100)


def completion(**fields):
    return parse_completion({"model": "tiny", "prompt": "once", **fields}, default_max_tokens=100)


def rejected(parse, **fields) -> APIError:
    with pytest.raises(APIError) as info:
        parse(**fields)
    assert info.value.status == 400
    return info.value


# -- honoured fields reach SamplingParams -------------------------------------------------


def test_unset_sampling_fields_stay_none_and_max_tokens_defaults_to_config():
    s = chat().sampling
    assert s.max_tokens == 100
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.seed, s.logit_bias) == (None,) * 6
    assert (s.repetition_penalty, s.presence_penalty, s.frequency_penalty) == (None,) * 3
    assert s.stop == []


def test_honoured_sampling_fields_reach_sampling_params():
    s = chat(
        temperature=0.5,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        repetition_penalty=1.1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        seed=42,
        logit_bias={"17": -100, "3": 5},
        stop="END",
        max_tokens=7,
    ).sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (0.5, 0.9, 40, 0.05)
    assert (s.repetition_penalty, s.presence_penalty, s.frequency_penalty) == (1.1, 0.5, -0.5)
    assert (s.seed, s.logit_bias, s.stop, s.max_tokens) == (42, {17: -100.0, 3: 5.0}, ["END"], 7)


def test_max_completion_tokens_sets_max_tokens():
    assert chat(max_completion_tokens=9).sampling.max_tokens == 9


def test_max_tokens_and_max_completion_tokens_that_differ_are_rejected():
    assert rejected(chat, max_tokens=5, max_completion_tokens=6).param == "max_tokens"


def test_equal_max_tokens_and_max_completion_tokens_are_accepted():
    assert chat(max_tokens=6, max_completion_tokens=6).sampling.max_tokens == 6


def test_top_k_minus_one_means_disabled():
    assert chat(top_k=-1).sampling.top_k == 0


def test_negative_seed_maps_to_its_unsigned_twin():
    assert chat(seed=-1).sampling.seed == 2**64 - 1


def test_stop_list_is_kept_in_order():
    assert chat(stop=["a", "b"]).sampling.stop == ["a", "b"]


def test_chat_template_kwargs_reach_the_worker_inputs():
    inputs = chat(chat_template_kwargs={"enable_thinking": False}).inputs
    assert inputs.chat_template_kwargs == {"enable_thinking": False}


def test_stream_options_include_usage_is_read():
    req = chat(stream=True, stream_options={"include_usage": True})
    assert (req.stream, req.include_usage) == (True, True)


@pytest.mark.parametrize(
    "field, value",
    [
        ("temperature", -0.1),
        ("temperature", 2.5),
        ("temperature", "hot"),
        ("temperature", True),
        ("top_p", 0),
        ("top_p", 1.5),
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_completion_tokens", 0),
        ("presence_penalty", 3),
        ("frequency_penalty", -3),
        ("min_p", 2),
        ("repetition_penalty", 0),
        ("top_k", -2),
        ("n", 0),
        ("seed", "x"),
        ("stop", ["a", "b", "c", "d", "e"]),
        ("stop", [""]),
        ("stop", 5),
        ("logit_bias", {"abc": 1}),
        ("logit_bias", {"5": 101}),
        ("stream", "yes"),
        ("chat_template_kwargs", []),
        ("user", 5),
    ],
)
def test_out_of_range_or_mistyped_fields_are_rejected_naming_the_field(field, value):
    assert rejected(chat, **{field: value}).param == field


def test_stream_options_without_stream_is_rejected():
    assert rejected(chat, stream_options={"include_usage": True}).param == "stream_options"


def test_unknown_stream_option_is_rejected_naming_its_path():
    error = rejected(chat, stream=True, stream_options={"bogus": 1})
    assert error.param == "stream_options.bogus"


# -- accepted no-ops, unsupported, unknown -------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"user": "u1"},
        {"store": False},
        {"metadata": {"k": "v"}},
        {"service_tier": "auto"},
        {"prompt_cache_key": "k"},
        {"prompt_cache_retention": "24h"},
        {"safety_identifier": "s"},
        {"parallel_tool_calls": True},
        {"logprobs": False},
        {"tools": []},
        {"tool_choice": "none"},
        {"tool_choice": "auto"},
        {"modalities": ["text"]},
        {"response_format": {"type": "text"}},
        {"n": 1},
        {"top_logprobs": None},
        {"stream": True, "stream_options": {"include_obfuscation": False}},
    ],
)
def test_fields_without_local_meaning_are_accepted(fields):
    chat(**fields)


@pytest.mark.parametrize(
    "field, value",
    [
        ("functions", [{"name": "f"}]),
        ("function_call", {"name": "f"}),
        ("prediction", {"type": "content", "content": "x"}),
        ("web_search_options", {}),
        ("verbosity", "low"),
    ],
)
def test_unsupported_openai_fields_are_rejected_as_not_supported(field, value):
    error = rejected(chat, **{field: value})
    assert error.param == field
    assert "not supported" in error.message


def test_audio_output_is_parsed_with_its_voice_and_format():
    req = chat(modalities=["text", "audio"], audio={"voice": {"id": "v1"}, "format": "mp3"})
    assert (req.audio_out.voice, req.audio_out.voice_by_id, req.audio_out.format) == (
        "v1", True, "mp3"
    )  # fmt: skip
    assert chat(modalities=["text"]).audio_out is None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"modalities": ["text", "audio"]}, "audio"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "video"]}, "modalities"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "a", "format": "ogg"}},
         "audio.format"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "", "format": "wav"}},
         "audio.voice"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "a", "format": "wav", "x": 1}},
         "audio.x"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "a", "format": "wav"},
          "stream": True}, "audio.format"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "a", "format": "wav"}, "n": 2},
         "n"),
    ],
)  # fmt: skip
def test_bad_audio_output_fields_are_400s_naming_them(fields, param):
    assert rejected(chat, **fields).param == param


def test_unknown_fields_are_rejected_as_unknown():
    error = rejected(chat, temprature=0.5)
    assert error.param == "temprature"
    assert "Unknown field" in error.message


def test_missing_model_is_rejected():
    with pytest.raises(APIError) as info:
        parse_chat({"messages": USER}, default_max_tokens=1)
    assert info.value.param == "model"


# -- messages ------------------------------------------------------------------------------


def test_messages_are_normalized_to_role_and_string_content():
    messages = [
        {"role": "developer", "content": "be brief"},
        {
            "role": "system",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
        {"role": "user", "content": "hi", "name": "bob"},
        {"role": "assistant", "content": "hello", "tool_calls": [], "refusal": None},
    ]
    req = parse_chat({"model": "tiny", "messages": messages}, default_max_tokens=1)
    assert req.inputs.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "a\nb"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


@pytest.mark.parametrize(
    "messages, param",
    [
        ([], "messages"),
        ("hi", "messages"),
        ([{"role": "user", "content": "x"}, "x"], "messages[1]"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "function", "content": "x", "name": "f"}], "messages[0].role"),
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
        ([{"role": "user", "content": None}], "messages[0].content"),
        ([{"role": "user", "content": "x", "extra": 1}], "messages[0].extra"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            "messages[0].content[0].type",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "b"},
                        {"type": "input_audio", "input_audio": {}},
                    ],
                },
            ],
            "messages[1].content[1].type",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": 3}]}],
            "messages[0].content[0].text",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}],
            "messages[0].tool_calls[0].function",
        ),
    ],
)
def test_unrepresentable_messages_are_rejected_naming_the_path(messages, param):
    with pytest.raises(APIError) as info:
        parse_chat({"model": "tiny", "messages": messages}, default_max_tokens=1)
    assert info.value.status == 400
    assert info.value.param == param


# -- completions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("once upon", "once upon"),
        ([1, 2, 3], [1, 2, 3]),
        (["once upon"], "once upon"),
        ([[1, 2, 3]], [1, 2, 3]),
        ([7], [7]),
    ],
)
def test_completion_prompt_forms(prompt, expected):
    req = completion(prompt=prompt)
    assert req.inputs.op == "complete"
    assert req.inputs.prompt == expected


@pytest.mark.parametrize("prompt", [["a", "b"], [[1], [2]]])
def test_more_than_one_prompt_is_rejected_naming_prompt(prompt):
    assert rejected(completion, prompt=prompt).param == "prompt"


@pytest.mark.parametrize("prompt", [None, [], [[]], [1, "a"], [-1], 5, [True]])
def test_malformed_prompts_are_rejected_naming_prompt(prompt):
    assert rejected(completion, prompt=prompt).param == "prompt"


@pytest.mark.parametrize(
    "field, value",
    [("best_of", 2), ("suffix", "end")],
)
def test_unsupported_completion_fields_are_rejected_as_not_supported(field, value):
    error = rejected(completion, **{field: value})
    assert error.param == field
    assert "not supported" in error.message


@pytest.mark.parametrize(
    "fields",
    [{"best_of": 1}, {"echo": False}, {"user": "u"}, {"suffix": ""}, {"n": 2, "best_of": 2}],
)
def test_completion_no_op_fields_are_accepted(fields):
    completion(**fields)


@pytest.mark.parametrize("field", ["messages", "max_completion_tokens", "chat_template_kwargs"])
def test_chat_only_fields_are_unknown_to_completions(field):
    assert rejected(completion, **{field: 1}).param == field


def test_completion_sampling_fields_reach_sampling_params():
    s = completion(temperature=0, max_tokens=3, stop=["\n"], top_k=5).sampling
    assert (s.temperature, s.max_tokens, s.stop, s.top_k) == (0.0, 3, ["\n"], 5)
