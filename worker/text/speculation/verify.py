"""Which proposed tokens a sequence accepts: the longest prefix its own sampler agrees with.

The verification pass gives each sequence the logits after its last token and after each of
its k proposals. Position j is sampled exactly as a decode step would sample it: the
sequence's logits processors (with the context up to that position), log-softmax, its sampler.
Proposal j+1 is accepted when it equals the token sampled at position j; the first position
whose token differs (or the one after the last proposal) gives the sequence's next token. So
every emitted token was drawn from the model's own distribution given everything before it,
which makes the output exactly that of decoding without speculation:

- greedy: the argmax, so token for token the same output;
- temperature > 0: proposals are deterministic (a continuation found in the text, a draft
  model's argmax), and for a proposal q that puts all its mass on one token d, speculative
  rejection sampling (accept d with probability min(1, p(d) / q(d)) = p(d), else draw from
  the residual p without d, renormalised) is the same as drawing t ~ p and accepting d iff
  t = d. Drawing it that way, with the request's own PRNG key split once per emitted token as
  the decode step splits it, even keeps a seeded request's tokens those of decoding without
  speculation (the keys of positions past the first disagreement are never used).

Stateful processors (a grammar, a thinking budget) must see each emitted token once and no
other: a sequence with processors is verified position by position, and a position is only
processed after the proposal before it was accepted. Sequences without processors (most) are
verified for all their positions at once, with one evaluation for the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import mlx.core as mx
from mlx_lm.sample_utils import greedy_sampler


@dataclass(slots=True)
class RowVerdict:
    """One sequence's outcome: `accepted` proposals, then `next_token` (sampled, not yet fed),
    and the log-probabilities each of those accepted + 1 tokens was sampled from."""

    accepted: int
    next_token: int
    logprobs: list[mx.array]


@dataclass(slots=True)
class Row:
    """One sequence of the verification pass: its logits (W, vocab), proposals and sampling."""

    logits: mx.array
    proposals: list[int]
    sampler: Any  # Callable[[mx.array], mx.array]; maybe with `draws` and `advance_to`
    processors: Sequence[Callable[[mx.array, mx.array], mx.array]]
    # The processors' token context (mlx-lm's TokenBuffer), when there are processors: the
    # tokens in the KV cache before this step; the step's fed tokens are appended here.
    context: Any = None
    fed: list[int] = field(default_factory=list)  # its inputs: last token, then proposals


def verify_rows(rows: list[Row]) -> list[RowVerdict]:
    """Each row's verdict (see the module docstring); evaluates what it needs."""
    verdicts: list[RowVerdict | None] = [None] * len(rows)
    lazy = []
    for i, row in enumerate(rows):
        if any(not _inert(p) for p in row.processors) or not _batchable(row.sampler):
            verdicts[i] = _stepwise(row)
        else:
            lazy.append((i, row, *_all_positions(row)))
    if lazy:
        mx.eval([(tokens, logprobs) for _, _, tokens, logprobs, _ in lazy])
        for i, row, tokens, logprobs, keys in lazy:
            drawn = cast(list[int], tokens.tolist())
            accepted = _agreeing(row.proposals, drawn)
            if keys is not None:  # the key after the accepted + 1 draws, as decoding leaves it
                row.sampler.advance_to(keys[accepted])
            verdicts[i] = RowVerdict(
                accepted, drawn[accepted], [logprobs[j] for j in range(accepted + 1)]
            )
    return [v for v in verdicts if v is not None]


def unwrapped(processor: Callable) -> Callable:
    """The logits processor inside the batch engine's wrappers (each sets `processor`)."""
    return getattr(processor, "processor", processor)


def _inert(processor: Any) -> bool:
    """A processor that masks nothing now or later (a lazy grammar switched off), seen
    through the batch engine's wrappers: its row is verified like one without processors."""
    return bool(getattr(unwrapped(processor), "inert", False))


def _batchable(sampler: Any) -> bool:
    """Samplers whose draws for all positions can be made at once: greedy (no state) and the
    request samplers that can draw a chain of positions and then move their key."""
    return sampler is greedy_sampler or hasattr(sampler, "draws")


def _all_positions(row: Row) -> tuple[mx.array, mx.array, list[mx.array] | None]:
    """Lazy tokens and log-probabilities of every position the row needs (its proposals + 1)."""
    n = len(row.proposals) + 1
    logits = row.logits[:n]
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    if row.sampler is greedy_sampler:
        return greedy_sampler(logprobs), logprobs, None
    tokens, keys = row.sampler.draws([logprobs[j : j + 1] for j in range(n)])
    return mx.concatenate(tokens), logprobs, keys


def _stepwise(row: Row) -> RowVerdict:
    """Position by position: the processors see a position only once the proposal before it
    was accepted, exactly as decoding would show it to them."""
    context = row.context
    base = 0
    if row.processors:
        base = context.tokens.size
        context.update_and_fetch(mx.array(row.fed, dtype=mx.int32))
    logprobs: list[mx.array] = []
    accepted = 0
    while True:
        logits = row.logits[accepted : accepted + 1]
        if row.processors:
            tokens = context.state[: base + accepted + 1]
            for processor in row.processors:
                logits = processor(tokens, logits)
        row_logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        token = row.sampler(row_logprobs)
        mx.eval(token, row_logprobs)
        drawn = cast(int, token.item())
        logprobs.append(row_logprobs[0])
        if accepted < len(row.proposals) and drawn == row.proposals[accepted]:
            accepted += 1
            continue
        break
    if row.processors:
        _truncate(context, base + accepted + 1)
    return RowVerdict(accepted, drawn, logprobs)


def _agreeing(proposals: list[int], drawn: list[int]) -> int:
    """How many proposals equal the tokens drawn before them."""
    n = 0
    while n < len(proposals) and proposals[n] == drawn[n]:
        n += 1
    return n


def _truncate(context: Any, size: int) -> None:
    """Drops the rejected tokens from mlx-lm's TokenBuffer (it only ever appends)."""
    context._size = size
