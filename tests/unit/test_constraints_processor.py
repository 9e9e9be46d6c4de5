"""The constraint logits processor on its own: masks, token bookkeeping, reasoning, close-out.

Logits are made up here (no model), over the tiny Qwen3 checkpoint's tokenizer.
"""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import pytest

from tests.support.inputs import constraint as as_constraint
from worker.text.constraints.close_out import close_out_candidates
from worker.text.constraints.grammars import constraint_grammar
from worker.text.constraints.llg import compile_matcher, ll_tokenizer
from worker.text.constraints.processor import ConstraintProcessor
from worker.text.constraints.think_gate import ThinkGate
from worker.text.model import load_text_model
from worker.tiny_models import ensure_checkpoint

PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def tokenizer():
    return load_text_model(str(ensure_checkpoint("qwen3"))).tokenizer


def processor(tokenizer, constraint, **kwargs) -> ConstraintProcessor:
    grammar, field = constraint_grammar(as_constraint(constraint))
    matcher = compile_matcher(tokenizer, grammar, field)
    words = (ll_tokenizer(tokenizer).vocab_size + 31) // 32
    return ConstraintProcessor(matcher, words, sorted(tokenizer.eos_token_ids), **kwargs)


def allowed(logits: mx.array) -> set[int]:
    return {i for i, v in enumerate(logits.reshape(-1).tolist()) if v != float("-inf")}


def vocab_size(tokenizer) -> int:
    return len(tokenizer.get_vocab())


def one(tokenizer, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == 1
    return ids[0]


def test_only_the_grammar_tokens_keep_their_logits(tokenizer):
    proc = processor(tokenizer, {"type": "json_schema", "schema": {"enum": ["yes"]}})
    logits = mx.arange(vocab_size(tokenizer), dtype=mx.float32)[None]
    out = proc(mx.array(PROMPT), logits)
    kept = allowed(out)
    assert kept and len(kept) < 20
    assert all(out[0, i].item() == i for i in kept)
    assert one(tokenizer, '"') in kept


def test_each_call_consumes_only_the_tokens_appended_since_the_last(tokenizer):
    proc = processor(tokenizer, {"type": "json_schema", "schema": {"enum": ["yes"]}})
    logits = mx.zeros((1, vocab_size(tokenizer)))
    proc(mx.array(PROMPT), logits)
    tokens = list(PROMPT)
    for token in tokenizer.encode('"yes"', add_special_tokens=False):
        tokens.append(token)
        out = proc(mx.array(tokens), logits)
    assert allowed(out) == set(tokenizer.eos_token_ids)


def test_ids_past_the_tokenizer_vocabulary_are_masked(tokenizer):
    proc = processor(tokenizer, {"type": "json_object"})
    width = 32 * ((vocab_size(tokenizer) + 31) // 32) + 64
    out = proc(mx.array(PROMPT), mx.zeros((1, width)))
    assert max(allowed(out)) < vocab_size(tokenizer)


def test_the_first_token_may_open_reasoning_then_thinking_is_free(tokenizer):
    vocab = tokenizer.get_vocab()
    gate = ThinkGate(vocab["<think>"], vocab["</think>"], starts_inside=False)
    proc = processor(tokenizer, {"type": "json_object"}, gate=gate)
    logits = mx.zeros((1, vocab_size(tokenizer)))
    first = allowed(proc(mx.array(PROMPT), logits))
    assert vocab["<think>"] in first and one(tokenizer, "{") in first
    thinking = allowed(proc(mx.array([*PROMPT, vocab["<think>"]]), logits))
    assert len(thinking) == vocab_size(tokenizer)
    answer = allowed(proc(mx.array([*PROMPT, vocab["<think>"], vocab["</think>"]]), logits))
    assert one(tokenizer, "{") in answer and vocab["<think>"] not in answer


def test_a_budget_only_processor_leaves_thinking_alone_until_the_budget(tokenizer):
    vocab = tokenizer.get_vocab()
    gate = ThinkGate(vocab["<think>"], vocab["</think>"], starts_inside=True)
    words = (vocab_size(tokenizer) + 31) // 32
    proc = ConstraintProcessor(None, words, [0], gate=gate, thinking_budget=2)
    logits = mx.zeros((1, vocab_size(tokenizer)))
    assert len(allowed(proc(mx.array(PROMPT), logits))) == vocab_size(tokenizer)
    assert len(allowed(proc(mx.array([*PROMPT, 7]), logits))) == vocab_size(tokenizer)
    assert allowed(proc(mx.array([*PROMPT, 7, 8]), logits)) == {vocab["</think>"]}


def test_an_answer_that_would_never_end_is_closed_before_max_tokens(tokenizer):
    # A "model" that always prefers one letter token: unconstrained it writes forever.
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    max_tokens = 30
    proc = processor(
        tokenizer,
        {"type": "json_schema", "schema": schema},
        max_tokens=max_tokens,
        close_candidates=close_out_candidates(tokenizer),
    )
    favourite = one(tokenizer, "x")
    base = mx.zeros((vocab_size(tokenizer),)).at[favourite].add(10.0)[None]
    tokens, generated = list(PROMPT), []
    for _ in range(max_tokens):
        token = int(mx.argmax(proc(mx.array(tokens), base)).item())
        if token in tokenizer.eos_token_ids:
            break
        tokens.append(token)
        generated.append(token)
    else:
        pytest.fail("never reached EOS")
    value = json.loads(tokenizer.decode(generated))
    assert isinstance(value["a"], str) and value["a"].startswith("x")
    assert proc.closed_out


def test_inside_a_string_the_close_out_closes_the_string_before_any_bracket():
    # A tokenizer whose `]]` is one token (qwen3 at size 20m): inside a string it is plain
    # text, allowed, and first in the preference list; forcing it would never end the string.
    from worker.text.constraints.close_out import CloseOut, pick

    eos, brackets, quote, letter = 0, 60, 1, 87
    close = CloseOut((eos, brackets, quote), quote, letter)
    words = np.zeros(4, dtype=np.uint32)
    for token in (brackets, quote, letter):  # inside a string: text, brackets and `"` allowed
        words[token >> 5] |= np.uint32(1 << (token & 31))
    assert pick(words, close) == quote
    words[letter >> 5] &= ~np.uint32(1 << (letter & 31))  # outside one: the list's order
    assert pick(words, close) == brackets
