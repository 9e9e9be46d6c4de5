"""Warm prompts: the JSONL file's parsing (bad lines name the line) and prefilling its prefixes
into the prefix cache."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

from protocol.inputs import ChatInputs, CompleteInputs
from protocol.launch.warm_prompts import (
    PREFILL_ONLY,
    WarmPrompt,
    WarmPromptsError,
    load_warm_prompts,
    parse_warm_prompts,
)
from worker.cache.prefix_cache import PrefixCache
from worker.cache.ssd_cache import SsdCacheTier
from worker.cache.warm_prompts import warm_prefix_cache
from worker.tiny_models import ensure_checkpoint

BIG = 1 << 30


def test_chat_and_completion_lines_become_submit_inputs_with_their_line_numbers():
    chat = {"messages": [{"role": "system", "content": "Be brief."}]}
    text = json.dumps(chat) + '\n\n{"prompt": "Once"}\n"Twice"\n{"prompt": [1, 2]}\n'
    assert parse_warm_prompts(text) == [
        WarmPrompt(1, ChatInputs(chat["messages"], PREFILL_ONLY)),
        WarmPrompt(3, CompleteInputs("Once", PREFILL_ONLY)),
        WarmPrompt(4, CompleteInputs("Twice", PREFILL_ONLY)),
        WarmPrompt(5, CompleteInputs([1, 2], PREFILL_ONLY)),
    ]


def test_chat_template_kwargs_travel_with_the_messages():
    line = '{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"a": 1}}'
    (prompt,) = parse_warm_prompts(line)
    assert prompt.inputs.chat_template_kwargs == {"a": 1}


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ('["prompt"]', "expected an object or a string"),
        ('{"prompt": "a", "messages": []}', "exactly one of"),
        ("{}", "exactly one of"),
        ('{"prompt": ""}', "'prompt' must be a non-empty string or list of token ids"),
        ('{"prompt": [1, "a"]}', "'prompt' must be a non-empty string or list of token ids"),
        ('{"messages": []}', "'messages' must be a non-empty list"),
        ('{"messages": [{"content": "x"}]}', "messages[0].role"),
        ('{"messages": [{"role": "user"}]}', "messages[0].content is missing"),
        ('{"prompt": "a", "temperature": 1}', "unknown field 'temperature'"),
        ('{"prompt": "a", "chat_template_kwargs": {}}', "unknown field 'chat_template_kwargs'"),
        (
            '{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1}',
            "must be an object",
        ),
    ],
)
def test_a_bad_line_is_an_error_naming_the_file_and_line(line, complaint):
    text = '{"prompt": "fine"}\n' + line + "\n"
    with pytest.raises(WarmPromptsError) as error:
        parse_warm_prompts(text, source="warm.jsonl")
    assert "warm.jsonl line 2" in str(error.value)
    assert complaint in str(error.value)


def test_parsing_imports_no_mlx():
    code = (
        "import sys, protocol.launch.warm_prompts; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(WarmPromptsError, match="missing.jsonl"):
        load_warm_prompts(tmp_path / "missing.jsonl")


def test_the_file_is_read_from_disk(tmp_path):
    path = tmp_path / "warm.jsonl"
    path.write_text('{"prompt": "Once upon a time"}\n')
    assert load_warm_prompts(path) == [
        WarmPrompt(1, CompleteInputs("Once upon a time", PREFILL_ONLY))
    ]


@pytest.fixture(scope="module")
def model():
    model, _ = load(str(ensure_checkpoint("qwen3")))
    return model


def tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 4000) for _ in range(n)]


def greedy(model, prompt: list[int], cache: list | None = None, n: int = 10) -> list[int]:
    cache = make_prompt_cache(model) if cache is None else cache
    return [t for t, _ in generate_step(mx.array(prompt), model, prompt_cache=cache, max_tokens=n)]


def test_warmed_prefixes_serve_later_prompts_exactly(model):
    system, question = tokens(50, 1), tokens(8, 2)
    pc = PrefixCache(BIG, "m")
    computed = warm_prefix_cache(pc, model, [system], lambda: make_prompt_cache(model), 16)
    assert computed == 50
    cached, remaining = pc.fetch(system + question)
    assert remaining == question
    assert greedy(model, remaining, cached) == greedy(model, system + question)


def test_warming_again_after_a_restart_restores_from_disk_instead_of_prefilling(model, tmp_path):
    system = tokens(50, 1)
    first = PrefixCache(BIG, "m", SsdCacheTier(tmp_path, BIG, "m"))
    warm_prefix_cache(first, model, [system], lambda: make_prompt_cache(model))
    first.ssd.close()
    second = PrefixCache(BIG, "m", SsdCacheTier(tmp_path, BIG, "m"))
    assert warm_prefix_cache(second, model, [system], lambda: make_prompt_cache(model)) == 1
