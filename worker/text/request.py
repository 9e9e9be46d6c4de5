"""One text request outside the model: its limits, sampler, detokenizer, stop strings and parser.

`build_text_request` validates and tokenizes a Submit (RequestError for input the client can
fix); `TextRequest.accept` turns each generated token into the request's Delta. The end rules
are `mlx_lm.stream_generate`'s, in its order: an EOS token ends with "stop" (it counts as a
completion token and adds no text), the max_tokens-th token ends with "length"; then a stop
string ends with "stop" and truncates the text before it. Text that survives the stop-string
matcher goes through the request's output parser (worker.text.features), which may split it
into content, reasoning and tool calls and may change the final finish reason.

The same object serves both generation paths (the batch path on mlx-lm's BatchGenerator and
the batch-1 path on its generate_step generators): the model only hands it tokens and logprobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import mlx.core as mx

from protocol.inputs import ChatInputs, CompleteInputs, SamplingParams
from protocol.messages import Delta, ErrorInfo, FinishReason, Submit, TokenLogprob, Usage
from worker.runtime.errors import bad_request
from worker.text.features import ParsedDelta, ResponseParser, build_features
from worker.text.padded_vocab import skip_tokens_without_entry
from worker.text.prompts import prompt_for
from worker.text.sampling import (
    make_request_logits_processors,
    make_request_sampler,
    resolve_sampling,
)
from worker.text.stop_strings import StopStringMatcher

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for top_logprobs

LogitsProcessor = Callable[[mx.array, mx.array], mx.array]
Sampler = Callable[[mx.array], mx.array]


class TextModelLike(Protocol):
    """What a request needs to know about the loaded model (worker.text.model.TextModel)."""

    tokenizer: Any
    max_context: int | None
    vocab_size: int
    sampling_defaults: dict[str, Any]


class TokenTexts:
    """Decoded text of single token ids (for logprobs), memoized per model."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._texts: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self._tokenizer.decode([token_id])
        return text


@dataclass(slots=True)
class TextRequest:
    """A request's state between tokens. `prompt` is the whole prompt; `cached_tokens` of it
    came from the prefix cache. `max_tokens` already includes the context-window limit."""

    request_id: str
    prompt: list[int]
    max_tokens: int
    sampler: Sampler
    logits_processors: list[LogitsProcessor]
    eos_token_ids: frozenset[int]
    detokenizer: Any
    stops: StopStringMatcher
    parser: ResponseParser
    logprobs: int | None = None
    token_texts: Callable[[int], str] = str
    # Some processors come from the output features (constraints, thinking budget): they keep
    # state, so they must see each sampled token exactly once.
    constrained: bool = False
    cached_tokens: int = 0
    adapter: int = 0  # the slot of its LoRA adapter (worker/text/adapters/), 0: none
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    generated: list[int] = field(default_factory=list)
    finish_reason: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)

    def accepted(self) -> Delta:
        """The request's first Delta: admitted, prompt built and (for the text engines) its
        cached prefix known, so the gateway can report the prompt's usage before any output."""
        return Delta(self.request_id, usage=Usage(self.prompt_tokens, 0, self.cached_tokens))

    def usage(self) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    def accept(
        self, token: int, logprobs: mx.array | None = None, end: FinishReason | None = None
    ) -> Delta:
        """The Delta for one generated token; `finish_reason` is set when the request ended.

        `logprobs` is the log-softmax over the vocabulary the token was sampled from (needed
        only when the request asked for logprobs). `end` forces an end the generator decided
        (it stopped the sequence): it only ever agrees with ours, but never leave one hanging.
        """
        self.completion_tokens += 1
        self.generated.append(token)
        finish = None
        if token in self.eos_token_ids:
            finish = FinishReason.STOP
        else:
            self.detokenizer.add_token(token)
            if self.completion_tokens >= self.max_tokens:
                finish = FinishReason.LENGTH
        if finish is None and end is not None:
            finish = end
        if finish is not None:
            self.detokenizer.finalize()
        text, hit_stop = self.stops.feed(self.detokenizer.last_segment)
        if hit_stop:
            finish = FinishReason.STOP
        elif finish is not None:
            text += self.stops.flush()
        parsed = self.parser.feed(text) if text else ParsedDelta()
        if parsed.reasoning and not parsed.content and not parsed.tool_calls:
            self.reasoning_tokens += 1
        delta = Delta(self.request_id, token_ids=[token])
        _add_parsed(delta, parsed)
        if self.logprobs is not None and logprobs is not None:
            delta.logprobs = [self._token_logprob(token, logprobs)]
        if finish is not None:
            self._finish(delta, finish)
            if hit_stop and delta.finish_reason == FinishReason.STOP:
                delta.stop_sequence = self.stops.matched
        return delta

    def end(self, reason: FinishReason, error: ErrorInfo | None = None) -> Delta:
        """The terminal Delta of a request ended from outside (abort, deadline, error)."""
        self.finish_reason = reason
        return Delta(self.request_id, finish_reason=reason, usage=self.usage(), error=error)

    def _finish(self, delta: Delta, finish: FinishReason) -> None:
        # The parser may hold text back (e.g. an unfinished tool call) and may turn "stop"
        # into "tool_calls"; an error or abort is never the parser's to change.
        tail, parsed = self.parser.finish(finish)
        _add_parsed(delta, tail)
        self.finish_reason = delta.finish_reason = FinishReason(parsed)
        delta.usage = self.usage()

    def _token_logprob(self, token: int, logprobs: mx.array) -> TokenLogprob:
        """The chosen token's logprob and the top-k alternatives (ties: lower id first)."""
        logprobs = logprobs.reshape(-1)
        texts = self.token_texts
        k = min(self.logprobs or 0, logprobs.size)
        top: list[list[Any]] = []
        if k > 0:
            ids = mx.argpartition(-logprobs, kth=k - 1)[:k]
            values = logprobs[ids]
            chosen = logprobs[token]
            mx.eval(ids, values, chosen)
            pairs = zip(ids.tolist(), values.tolist(), strict=True)
            pairs = sorted(pairs, key=lambda p: (-p[1], p[0]))
            top = [[i, texts(i), v] for i, v in pairs]
        else:
            chosen = logprobs[token]
        return TokenLogprob(token_id=token, token=texts(token), logprob=chosen.item(), top=top)


def build_text_request(text_model: TextModelLike, submit: Submit) -> TextRequest:
    """Validates and tokenizes a Submit (RequestError when it is bad); no model work."""
    inputs = submit.inputs
    assert isinstance(inputs, ChatInputs | CompleteInputs)  # the scheduler routes by op
    prompt = prompt_for(text_model, inputs)
    return make_text_request(text_model, submit.request_id, prompt, inputs)


def make_text_request(
    text_model: TextModelLike,
    request_id: str,
    prompt: list[int],
    inputs: ChatInputs | CompleteInputs,
) -> TextRequest:
    """A request for prompt ids that are already built and checked (RequestError when the
    sampling parameters are bad)."""
    sampling = inputs.sampling
    _validate(sampling)
    resolved = resolve_sampling(sampling, text_model.sampling_defaults, text_model.vocab_size)
    processors = list(make_request_logits_processors(resolved))
    tokenizer = text_model.tokenizer
    features = build_features(tokenizer, inputs, prompt)
    processors += list(features.logits_processors)
    max_tokens = sampling.max_tokens
    if text_model.max_context is not None:
        # The context window ends generation like max_tokens does ("length").
        max_tokens = min(max_tokens, text_model.max_context - len(prompt))
    return TextRequest(
        request_id=request_id,
        prompt=prompt,
        max_tokens=max_tokens,
        sampler=make_request_sampler(resolved, text_model.vocab_size),
        logits_processors=processors,
        eos_token_ids=frozenset(tokenizer.eos_token_ids),
        detokenizer=skip_tokens_without_entry(tokenizer.detokenizer),
        stops=StopStringMatcher(sampling.stop or []),
        parser=features.parser,
        logprobs=sampling.logprobs,
        token_texts=getattr(text_model, "token_texts", None) or TokenTexts(tokenizer),
        constrained=bool(features.logits_processors),
    )


def _validate(sampling: SamplingParams) -> None:
    max_tokens = sampling.max_tokens
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise bad_request(f"max_tokens must be an integer, got {max_tokens!r}")
    if max_tokens < 1:
        raise bad_request(f"max_tokens must be at least 1, got {max_tokens}")
    stops = sampling.stop or []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_request("stop must be a list of strings")
    k = sampling.logprobs
    if k is not None and (
        isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_TOP_LOGPROBS
    ):
        raise bad_request(
            f"logprobs must be an integer between 0 and {MAX_TOP_LOGPROBS}, got {k!r}"
        )


def _add_parsed(delta: Delta, parsed: ParsedDelta) -> None:
    delta.text += parsed.content
    delta.reasoning += parsed.reasoning
    delta.tool_calls.extend(parsed.tool_calls)


def all_tokens(request: TextRequest) -> list[int]:
    """Prompt + generated tokens: what the request's KV cache holds once it is done."""
    return [*request.prompt, *request.generated]


def terminal(
    request_id: str,
    reason: FinishReason,
    usage: Usage | None = None,
    error: ErrorInfo | None = None,
) -> Delta:
    """A terminal Delta for a request that has no TextRequest (rejected before it had one)."""
    return Delta(request_id, finish_reason=reason, usage=usage or Usage(0, 0), error=error)
