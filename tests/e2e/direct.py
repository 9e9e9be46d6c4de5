"""What mlx-lm produces when called directly: the reference the server must equal."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from mlx_lm import load, stream_generate
from mlx_lm.sample_utils import make_sampler


@dataclass
class DirectResult:
    text: str
    tokens: list[int]
    prompt_tokens: int
    finish_reason: str


@lru_cache(maxsize=4)
def load_model(path: str):
    return load(path)


def chat_prompt(path: str, messages: list[dict]) -> list[int]:
    """The prompt a user of mlx-lm builds: the checkpoint's chat template, generation prompt on."""
    _, tokenizer = load_model(path)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)


def greedy(path: str, prompt: str | list[int], max_tokens: int) -> DirectResult:
    model, tokenizer = load_model(path)
    text, tokens, last = "", [], None
    for last in stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    ):
        text += last.text
        tokens.append(last.token)
    return DirectResult(text, tokens, last.prompt_tokens, last.finish_reason)


def greedy_chat(path: str, messages: list[dict], max_tokens: int) -> DirectResult:
    return greedy(path, chat_prompt(path, messages), max_tokens)
