"""The lazy grammar of bare JSON calls (worker/text/constraints/bare_calls.py) on its own: it
masks nothing until a response opens a call, then holds it to the calls of the declared tools.

Logits are made up here (no model), over the tiny Qwen3 checkpoint's tokenizer.
"""

from __future__ import annotations

import mlx.core as mx
import pytest

from worker.text.constraints.bare_calls import MAX_OPENING_TOKENS, bare_call_trigger
from worker.text.constraints.llg import ll_tokenizer
from worker.text.constraints.processor import ConstraintProcessor
from worker.text.model import load_text_model
from worker.tiny_models import ensure_checkpoint

PROMPT = [1, 2, 3]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(scope="module")
def tokenizer():
    return load_text_model(str(ensure_checkpoint("qwen3"))).tokenizer


def guarded(tokenizer, tools=(WEATHER,)) -> ConstraintProcessor:
    trigger = bare_call_trigger(tokenizer, list(tools))
    assert trigger is not None
    words = (ll_tokenizer(tokenizer).vocab_size + 31) // 32
    return ConstraintProcessor(None, words, sorted(tokenizer.eos_token_ids), trigger=trigger)


def written(tokenizer, text: str, tools=(WEATHER,)) -> tuple[ConstraintProcessor, mx.array]:
    """A fresh guarded processor fed `text`'s tokens as the response so far, and its mask for
    the next token."""
    proc = guarded(tokenizer, tools)
    ids = tokenizer.encode(text, add_special_tokens=False)
    logits = mx.zeros((1, len(tokenizer.get_vocab())))
    proc(mx.array(PROMPT), logits)
    return proc, proc(mx.array(PROMPT + ids), logits)


def names_allowed(tokenizer, mask: mx.array) -> set[str]:
    return {tokenizer.decode([token]) for token in allowed(mask)}


def allowed(logits: mx.array) -> list[int]:
    return [i for i, v in enumerate(logits.reshape(-1).tolist()) if v != float("-inf")]


@pytest.mark.parametrize(
    "opening",
    [
        "Sure, here it is:",
        "```python\nprint(1)",
        "  \n\nOK",
        '{"city": "Paris"}',  # a JSON answer: its first key is not "name"
        '```json\n{"city": "Paris"}',
        "```json5\n{",
        "[1, 2]",
    ],
)
def test_an_answer_that_opens_otherwise_is_never_masked(tokenizer, opening):
    proc, mask = written(tokenizer, opening)
    assert len(allowed(mask)) == mask.shape[-1]
    assert proc.inert


@pytest.mark.parametrize("opening", ["{", '{"na', "```js", "```json", "```json\n", " \n"])
def test_an_opening_that_may_still_be_a_call_is_not_masked_yet(tokenizer, opening):
    proc, mask = written(tokenizer, opening)
    assert len(allowed(mask)) == mask.shape[-1]
    assert not proc.inert


@pytest.mark.parametrize(
    "opening",
    ['{"name": "', ' \n{"name": "', '```json\n{"name": "', '{\n  "name": "', '{"name":"'],
)
def test_a_call_opening_is_held_to_the_declared_names(tokenizer, opening):
    _, mask = written(tokenizer, opening)
    texts = names_allowed(tokenizer, mask)
    assert texts and all("get_weather".startswith(text) for text in texts), sorted(texts)[:10]


@pytest.mark.parametrize(
    "call",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name":"get_weather","arguments":{"city":"Paris"}}',
        '{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n\n```',
    ],
)
def test_a_well_formed_call_in_any_layout_is_written_unchanged(tokenizer, call):
    """Every token of a well-formed call (name first) is allowed, and then the end."""
    proc = guarded(tokenizer)
    ids = tokenizer.encode(call, add_special_tokens=False)
    logits = mx.zeros((1, len(tokenizer.get_vocab())))
    proc(mx.array(PROMPT), logits)
    for n, token in enumerate(ids):
        mask = proc(mx.array(PROMPT + ids[:n]), logits)
        assert mask[0, token].item() == 0, (call, n, tokenizer.decode(ids[:n]))
    done = proc(mx.array(PROMPT + ids), logits)
    assert set(tokenizer.eos_token_ids) <= set(allowed(done))


def test_a_call_is_closed_with_its_arguments_and_then_ends(tokenizer):
    """Made-up keys are out, and after the one call only the end of the response is in."""
    _, after_city = written(tokenizer, '{"name": "get_weather", "arguments": {"city": "Paris"')
    assert not any(text.startswith(",") for text in names_allowed(tokenizer, after_city))
    _, done = written(tokenizer, '{"name": "get_weather", "arguments": {"city": "Paris"}}')
    assert set(tokenizer.eos_token_ids) <= set(allowed(done))
    assert not any("{" in text for text in names_allowed(tokenizer, done))  # no second call


def test_a_call_near_max_tokens_is_not_closed_out(tokenizer):
    """Unlike a forced call, a lazy one is not steered shut before max_tokens: cut off, it
    stays content rather than a call with half an argument."""
    trigger = bare_call_trigger(tokenizer, [WEATHER])
    words = (ll_tokenizer(tokenizer).vocab_size + 31) // 32
    proc = ConstraintProcessor(None, words, sorted(tokenizer.eos_token_ids), trigger=trigger)
    ids = tokenizer.encode(
        '{"name": "get_weather", "arguments": {"city": "Par', add_special_tokens=False
    )
    logits = mx.zeros((1, len(tokenizer.get_vocab())))
    proc(mx.array(PROMPT), logits)
    proc(mx.array(PROMPT + ids), logits)
    assert not proc.closed_out


@pytest.mark.parametrize("opening", ["\n", "```json\n" + "\n", "{" + " \n"])
def test_an_opening_undecided_for_too_long_switches_the_trigger_off(tokenizer, opening):
    head, tail = opening[:-1], opening[-1]
    proc, _ = written(tokenizer, head + tail * (4 * MAX_OPENING_TOKENS))
    assert proc.inert


def test_a_schema_llguidance_refuses_leaves_the_request_unguarded(tokenizer):
    broken = {"type": "function", "function": {"name": "f", "parameters": {"type": "strin"}}}
    assert bare_call_trigger(tokenizer, [broken]) is None
