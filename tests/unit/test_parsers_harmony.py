"""Harmony (GPT-OSS) output: channels to reasoning, calls and content, fed as a model emits it.

Each scripted response is encoded with the tiny GPT-OSS checkpoint's tokenizer (its harmony
markers are single special tokens, as in the real o200k_harmony vocabulary) and fed back the
way the engine feeds text: one detokenized piece per token, through mlx-lm's streaming
detokenizer. The same text fed one character at a time gives the same result.
"""

from __future__ import annotations

import json

import pytest

from protocol.messages import FinishReason
from worker.text.constraints.think_gate import HarmonyGate
from worker.text.parsers.harmony import HarmonyParser, header_route
from worker.text.parsers.registry import detect_harmony
from worker.text.parsers.tool_base import ToolContext
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.gpt_oss import TemplateUnavailable

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather. I'll call the tool.<|end|>"
CALL = (
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris"}'
)
FINAL = "<|start|>assistant<|channel|>final<|message|>It is **sunny** in Paris: 21 °C."

CASES = {
    "analysis then final": (
        ANALYSIS + FINAL,
        "It is **sunny** in Paris: 21 °C.",
        "The user wants the weather. I'll call the tool.",
        [],
    ),
    "analysis then a call": (
        ANALYSIS + CALL,
        "",
        "The user wants the weather. I'll call the tool.",
        [("get_weather", {"city": "Paris"})],
    ),
    "a call with its recipient before the channel": (
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": '
        '"Tokyo"}',
        "",
        "",
        [("get_weather", {"city": "Tokyo"})],
    ),
    "a preamble on commentary is content": (
        "<|channel|>commentary<|message|>Checking the forecast.<|end|>" + CALL,
        "Checking the forecast.",
        "",
        [("get_weather", {"city": "Paris"})],
    ),
    "final only, ended by <|return|> in the text": (
        "<|channel|>final<|message|>Paris.<|return|>",
        "Paris.",
        "",
        [],
    ),
    "text that is not harmony is content as it is": (
        "Paris is the capital of France.",
        "Paris is the capital of France.",
        "",
        [],
    ),
}


@pytest.fixture(scope="module")
def tokenizer():
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    try:
        path = ensure_checkpoint("gpt_oss")
    except TemplateUnavailable as exc:
        pytest.skip(f"the published GPT-OSS template could not be fetched: {exc}")
    return load_tokenizer(path)


def token_pieces(tokenizer, text: str) -> list[str]:
    """`text` as the engine hands it to the parser: one detokenized piece per token."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    detokenizer = tokenizer.detokenizer
    detokenizer.reset()
    pieces = []
    for token in ids:
        detokenizer.add_token(token)
        pieces.append(detokenizer.last_segment)
    detokenizer.finalize()
    pieces.append(detokenizer.last_segment)
    return pieces


def parse(pieces: list[str], tools=(WEATHER,), finish=FinishReason.STOP):
    parser = HarmonyParser(ToolContext.of(list(tools)) if tools else None)
    content = reasoning = ""
    calls: dict[int, list] = {}
    deltas = [parser.feed(piece) for piece in pieces]
    last, finish_reason = parser.finish(finish)
    for delta in [*deltas, last]:
        content += delta.content
        reasoning += delta.reasoning
        for piece in delta.tool_calls:
            entry = calls.setdefault(piece.index, [None, ""])
            entry[0] = piece.name or entry[0]
            entry[1] += piece.arguments
    parsed_calls = [(name, json.loads(arguments)) for name, arguments in calls.values()]
    return content, reasoning, parsed_calls, finish_reason


@pytest.mark.parametrize("name", CASES)
def test_token_by_token(tokenizer, name):
    text, content, reasoning, calls = CASES[name]
    assert len(tokenizer.encode("<|channel|>", add_special_tokens=False)) == 1
    got = parse(token_pieces(tokenizer, text))
    assert got[:3] == (content, reasoning, calls)
    assert got[3] == (FinishReason.TOOL_CALLS if calls else FinishReason.STOP)


@pytest.mark.parametrize("name", CASES)
def test_character_by_character(name):
    text, content, reasoning, calls = CASES[name]
    assert parse(list(text))[:3] == (content, reasoning, calls)


def test_without_tools_a_call_message_is_content():
    content, reasoning, calls, finish = parse(list(ANALYSIS + CALL), tools=())
    assert (content, calls, finish) == ('{"city": "Paris"}', [], FinishReason.STOP)
    assert reasoning.startswith("The user wants")


def test_reasoning_is_reported_while_inside_analysis():
    parser = HarmonyParser()
    parser.feed("<|channel|>analysis<|message|>Thinking")
    assert parser.in_reasoning
    parser.feed("<|end|><|start|>assistant<|channel|>final<|message|>Done")
    assert not parser.in_reasoning


def test_a_header_cut_off_by_the_token_limit_is_not_content():
    parser = HarmonyParser()
    delta = parser.feed("<|channel|>analysis<|message|>Hmm<|end|><|start|>assistant<|chan")
    last, finish = parser.finish(FinishReason.LENGTH)
    assert (delta.content + last.content, delta.reasoning, finish) == ("", "Hmm", "length")


def test_a_call_open_when_generation_stops_keeps_the_arguments_it_has():
    _, _, calls, finish = parse(list(CALL), finish=FinishReason.LENGTH)
    assert calls == [("get_weather", {"city": "Paris"})] and finish == "length"


def test_routes_of_headers():
    assert header_route("<|channel|>analysis") == ("reasoning", None)
    assert header_route("<|channel|>commentary to=functions.f <|constrain|>json") == (
        "call",
        "functions.f",
    )
    assert header_route("<|start|>assistant<|channel|>final") == ("content", None)


def test_detected_from_the_published_template(tokenizer):
    assert detect_harmony(tokenizer.chat_template, tokenizer.get_vocab())
    assert not detect_harmony("{{ messages }}", tokenizer.get_vocab())


def test_the_thinking_gate_counts_analysis_tokens_only(tokenizer):
    vocab = tokenizer.get_vocab()
    gate = HarmonyGate(vocab["<|message|>"], vocab["<|end|>"], tokenizer.decode)
    text = ANALYSIS + FINAL
    states = []
    for token in tokenizer.encode(text, add_special_tokens=False):
        assert gate.advance(token)  # harmony grammars cover every token
        states.append(gate.state)
    analysis_body = tokenizer.encode(
        "The user wants the weather. I'll call the tool.", add_special_tokens=False
    )
    assert gate.thinking_tokens == len(analysis_body)
    assert states.count("inside") == len(analysis_body) + 1  # from <|message|> to <|end|>
    assert gate.state == "body" and gate.answering


def test_the_tiny_gpt_oss_checkpoint_is_harmony_unless_a_flag_names_another_format(tokenizer):
    from worker.text.features import configure

    try:
        assert configure(None, None, tokenizer, warm=False).harmony
        assert configure("none", "openai", tokenizer, warm=False).harmony
        other = configure(None, "hermes", tokenizer, warm=False)
        assert not other.harmony and other.tools.name == "hermes"
        assert not configure("none", "none", tokenizer, warm=False).harmony
    finally:
        configure(None, None, tokenizer, warm=False)


def test_a_message_to_a_built_in_tool_or_a_made_up_header_is_content_not_a_call():
    text = "<|channel|>commentary to=python <|message|>print(1)<|end|>"
    content, _, calls, finish = parse(list(text))
    assert (content, calls, finish) == ("print(1)", [], FinishReason.STOP)
    content, _, calls, _ = parse(list("<|start|>functions.x to=assistant<|message|>{}"))
    assert (content, calls) == ("{}", [])


def test_two_messages_on_one_route_are_two_paragraphs():
    text = (
        "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B"
        "<|end|><|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done."
    )
    content, reasoning, _, _ = parse(list(text))
    assert (content, reasoning) == ("Checking.\n\nDone.", "A\n\nB")


@pytest.mark.parametrize("word", ["t", "to", "Paris"])
def test_a_short_plain_answer_is_kept(word):
    assert parse([word])[0] == word


def test_constraint_grammars_are_nested_in_a_final_message():
    from worker.text.parsers.harmony import final_message_grammar

    class Kit:
        def token(self, marker):
            return f'"{marker}"'

        def json(self, schema):
            return "%json {}"

    two = json.dumps({"grammars": [{"lark_grammar": "start: @sub"}, {"name": "sub", "x": 1}]})
    wrapped = json.loads(final_message_grammar(two, Kit()))["grammars"]
    assert [g.get("name") for g in wrapped] == [None, "final_body", "sub"]
    lark = json.loads(final_message_grammar('start: "a"', Kit()))["grammars"]
    assert lark[1] == {"lark_grammar": 'start: "a"', "name": "final_body"}
    for bad in ('{"grammars": 5}', '{"grammars": [1]}', '{"grammars": []}'):
        with pytest.raises(ValueError):
            final_message_grammar(bad, Kit())
