"""Parser names and detection of a checkpoint's tool-call and reasoning formats."""

from __future__ import annotations

import pytest

from worker.text.features import configure, model_features
from worker.text.model import load_text_model
from worker.text.parsers.registry import (
    detect_reasoning_format,
    detect_tool_format,
    reasoning_format,
    tool_format,
    tool_format_names,
)
from worker.tiny_models import ensure_checkpoint

# The lines of each family's published chat template that give its syntax away.
TEMPLATE_SNIPPETS = {
    "hermes": '{{- "<tool_call>\\n{\\"name\\": " }}{{ tool_call.name }}',
    "qwen3_coder": "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}",
    "mistral": "{{- '[TOOL_CALLS][' }}{% for tool in message.tool_calls %}",
    "mistral_v11": "{{- '[TOOL_CALLS]' + tool.function.name + '[ARGS]' + arguments }}",
    "deepseek_v3": (
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
        "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments']}}"
    ),
    "deepseek_v31": (
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + "
        "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"
    ),
    "llama3_json": (
        "{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}"
        '{{- tool_call.arguments | tojson }}{{- "<|eot_id|>" }}'
    ),
}


@pytest.fixture(scope="module")
def qwen3():
    return load_text_model(str(ensure_checkpoint("qwen3")))


@pytest.fixture(scope="module")
def llama():
    return load_text_model(str(ensure_checkpoint("llama")))


@pytest.mark.parametrize("expected, snippet", sorted(TEMPLATE_SNIPPETS.items()))
def test_tool_format_is_detected_from_the_chat_template(expected, snippet):
    detected = detect_tool_format(snippet)
    assert detected is not None and detected.name == expected


def test_a_template_without_tool_syntax_falls_back_to_mlx_lm_tool_parser_type():
    detected = detect_tool_format("{{ messages }}", {"tool_parser_type": "gemma4"})
    assert detected is not None and detected.name == "gemma4"


def test_deepseek_v32_is_detected_from_mlx_lm_s_python_renderer():
    """DeepSeek-V3.2 has no Jinja template: mlx-lm renders its chats with a Python module,
    which the tokenizer carries; the DSML format is detected from it."""
    from mlx_lm.chat_templates import deepseek_v32

    from worker.text.features import _tokenizer_config

    class Wrapped:
        _chat_template = staticmethod(deepseek_v32.apply_chat_template)
        init_kwargs = {}

    detected = detect_tool_format("", _tokenizer_config(Wrapped()))
    assert detected is not None and detected.name == "deepseek_v32"


def test_a_template_without_tool_syntax_and_no_config_has_no_tool_format():
    assert detect_tool_format("{{ messages }}", {}) is None


def test_every_listed_tool_parser_name_resolves():
    for name in tool_format_names():
        assert tool_format(name).make_parser is not None


def test_an_unknown_tool_parser_name_is_refused_listing_the_known_ones():
    with pytest.raises(ValueError, match="hermes"):
        tool_format("nope")


def test_an_unknown_reasoning_parser_name_is_refused_listing_the_known_ones():
    with pytest.raises(ValueError, match="deepseek_r1"):
        reasoning_format("nope")


def test_reasoning_needs_think_markers_in_the_template_and_the_vocabulary():
    vocab = {"<think>": 1, "</think>": 2}
    assert detect_reasoning_format("{{ '<think>\\n' }}", vocab).name == "qwen3"
    assert detect_reasoning_format("{{ messages }}", vocab) is None
    assert detect_reasoning_format("{{ '<think>\\n' }}", {}) is None


def test_a_deepseek_r1_template_gets_the_always_inside_reasoning_format():
    template = "{{'<｜Assistant｜>' + content.split('</think>')[-1]}}"
    fmt = detect_reasoning_format(template, {"<think>": 1, "</think>": 2})
    assert fmt.name == "deepseek_r1" and fmt.starts_inside("")


def test_qwen3_reasoning_starts_inside_only_when_the_prompt_left_a_block_open():
    fmt = reasoning_format("qwen3")
    assert fmt.starts_inside("<|im_start|>assistant\n<think>\n")
    assert not fmt.starts_inside("<|im_start|>assistant\n")
    assert not fmt.starts_inside("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_the_tiny_qwen3_checkpoint_is_detected_as_hermes_with_qwen3_reasoning(qwen3):
    features = configure(None, "auto", qwen3.tokenizer)
    assert features.tools.name == "hermes"
    assert features.reasoning.name == "qwen3"
    assert features.think_ids == tuple(
        qwen3.tokenizer.get_vocab()[m] for m in ("<think>", "</think>")
    )


def test_the_tiny_llama_checkpoint_has_neither_format(llama):
    features = model_features(llama.tokenizer)
    assert features.tools is None and features.reasoning is None


def test_configure_by_name_and_none_override_detection(qwen3):
    try:
        features = configure("none", "qwen3_coder", qwen3.tokenizer)
        assert features.reasoning is None and features.tools.name == "qwen3_coder"
        assert model_features(qwen3.tokenizer) is features
    finally:
        configure(None, None, qwen3.tokenizer)
