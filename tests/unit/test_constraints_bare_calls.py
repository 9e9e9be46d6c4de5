"""The lazy grammar of bare JSON calls (worker/text/constraints/bare_calls.py) on its own: it
masks nothing until a response opens a call, then holds it to the calls of the declared tools.

Logits are made up here (no model), over the tiny Qwen3 checkpoint's tokenizer.
"""

from __future__ import annotations

import mlx.core as mx
import pytest

from worker.text.constraints.bare_calls import bare_call_trigger
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


def written(tokenizer, proc: ConstraintProcessor, text: str) -> mx.array:
    """Feeds `text`'s tokens as the response so far; the logits mask for the next token."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    size = len(tokenizer.get_vocab())
    logits = mx.zeros((1, size))
    proc(mx.array(PROMPT), logits)
    return proc(mx.array(PROMPT + ids), logits)


def allowed(logits: mx.array) -> list[int]:
    return [i for i, v in enumerate(logits.reshape(-1).tolist()) if v != float("-inf")]


@pytest.mark.parametrize("opening", ["Sure, here it is:", "```python\nprint(1)", "  \n\nOK"])
def test_an_answer_that_opens_otherwise_is_never_masked(tokenizer, opening):
    proc = guarded(tokenizer)
    mask = written(tokenizer, proc, opening)
    assert len(allowed(mask)) == mask.shape[-1]
    assert len(allowed(written(tokenizer, proc, opening + ' {"name": "x"'))) == mask.shape[-1]


@pytest.mark.parametrize("opening", ['{"name": "', ' \n{"name": "', '```json\n{"name": "'])
def test_a_call_opening_is_held_to_the_declared_names(tokenizer, opening):
    mask = written(tokenizer, guarded(tokenizer), opening)
    texts = {tokenizer.decode([token]) for token in allowed(mask)}
    assert texts and all("get_weather".startswith(text) for text in texts), sorted(texts)[:10]


def test_a_call_is_closed_with_its_arguments_and_then_ends(tokenizer):
    """Made-up keys are out, and after the one call only the end of the response is in."""
    proc = guarded(tokenizer)
    after_name = written(tokenizer, proc, '{"name": "get_weather", "arguments": {"city": "Paris"')
    texts = {tokenizer.decode([token]) for token in allowed(after_name)}
    assert "}" in texts or "}}" in texts
    assert not any(text.startswith(",") for text in texts)  # no made-up keys
    done = written(tokenizer, proc, '{"name": "get_weather", "arguments": {"city": "Paris"}}')
    texts = {tokenizer.decode([token]) for token in allowed(done)}
    assert set(tokenizer.eos_token_ids) <= set(allowed(done))
    assert not any("{" in text for text in texts)  # no second call


def test_a_schema_llguidance_refuses_leaves_the_request_unguarded(tokenizer):
    broken = {"type": "function", "function": {"name": "f", "parameters": {"type": "strin"}}}
    assert bare_call_trigger(tokenizer, [broken]) is None
