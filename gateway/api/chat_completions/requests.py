"""Parse OpenAI completions bodies into what the engine takes (chat bodies:
gateway/generation/chat_body.py, which the Realtime API reads too).

Field policy as in chat_body.py: every top-level field is honoured, accepted with no local
meaning, accepted only at its no-op value, or a 400 naming it; the table in surface.py says
which, with each field's type and range, and a body is checked against it first. Combinations
this server cannot serve are 400s naming one of their fields.
"""

from __future__ import annotations

from typing import Any

from gateway.api.chat_completions.surface import COMPLETION
from gateway.generation.chat_body import choice_count, model_of
from gateway.generation.request import GenerationRequest
from gateway.generation.vllm_structured import vllm_constraint
from gateway.http.errors import invalid, unsupported
from gateway.schema import readers as f
from protocol.inputs import CompleteInputs

__all__ = ["GenerationRequest", "parse_completion", "normalize_prompt"]


def parse_completion(body: dict, default_max_tokens: int) -> GenerationRequest:
    """A `/v1/completions` body -> op "complete" inputs + sampling, or a 400 naming a field."""
    COMPLETION.check(body)
    model = model_of(body)
    prompt = normalize_prompt(body.get("prompt"))
    n = choice_count(body)
    best_of = f.integer(body, "best_of", 1)
    if best_of is not None and best_of != n:
        raise unsupported("best_of", "a value other than n (server-side ranking of candidates)")
    if f.string(body, "suffix"):
        raise unsupported("suffix", "fill-in-the-middle: the served models have none")
    max_tokens = f.integer(body, "max_tokens", 1)
    sampling = f.sampling_params(body, max_tokens or default_max_tokens)
    sampling.logprobs = f.integer(body, "logprobs")
    sampling.constraint = vllm_constraint(body, None)
    echo = None
    if f.boolean(body, "echo"):
        if not isinstance(prompt, str):
            raise unsupported("echo", "with a prompt of token ids")
        if sampling.logprobs is not None:
            raise unsupported("echo", "together with logprobs (prompt-token logprobs)")
        echo = prompt
    stream, include_usage = f.stream_flags(body)
    return GenerationRequest(
        model=model,
        inputs=CompleteInputs(prompt=prompt, sampling=sampling),
        stream=stream,
        include_usage=include_usage,
        n=n,
        echo=echo,
        max_tokens_field="max_tokens" if max_tokens else None,
        time_limit=f.time_limit(body),
    )


def _is_token_ids(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    )


def normalize_prompt(prompt: Any) -> str | list[int]:
    """A string, a list of token ids, or a one-element list of either."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise unsupported("prompt", "more than one prompt per request")
    if isinstance(prompt, str):
        return prompt
    if _is_token_ids(prompt) and prompt:
        return prompt
    raise invalid(
        "prompt",
        "`prompt` must be a string, a non-empty array of token ids (integers >= 0), "
        "or a one-element array of either",
    )
