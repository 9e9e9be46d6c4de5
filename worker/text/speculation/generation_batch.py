"""mlx-lm's GenerationBatch with a verification step: each row's last token and its proposals
in one forward pass.

Upstream, a decode step feeds every row the token sampled in the step before (the "pending"
token) and samples the next one, asynchronously: the step returns the pending tokens while the
pass that consumes them runs. Here, when the speculator (speculator.py) lets some row propose,
the step first evaluates the pending tokens (a proposal must follow the last token), asks for
proposals, and if any row has some, feeds every row `[pending, proposals..., padding]` (W wide,
W = 1 + the most proposals of any row) in one model call. Each row accepts the longest prefix
its own sampler agrees with (verify.py), the KV cache is rewound past the rest (kv_rewind.py:
the batch's cache is ragged, each row ending at a length of its own, from the moment rows join),
and the step returns, per row, the pending token and the accepted proposals (all fed: the
invariant upstream keeps, that a returned token is in the KV cache), one Response each, in
order; the token sampled after them becomes the new pending token. Whether a batch of several
rows may verify at all is the speculator's BatchGate's call (adaptive.py), by the tokens/s of
its steps each way. Stop sequences and
max_tokens apply token by token, as upstream, and a row that ends mid-run returns its cache cut
to the tokens it returned. With no proposals at all the step is upstream's.

The model call is `self.model`, which the fused generator swaps for its fused pass
(worker/text/fused_generator.py) when a prefill chunk rides in the step.
"""

from __future__ import annotations

from typing import Any, cast

import mlx.core as mx
from mlx_lm.generate import GenerationBatch

from worker.text.speculation.kv_rewind import ragged, rewind, trimmed
from worker.text.speculation.speculator import Speculator
from worker.text.speculation.verify import Row, verify_rows


class SpeculativeGenerationBatch(GenerationBatch):
    """A GenerationBatch that verifies proposals; `speculator` is set after `empty()`."""

    speculator: Speculator

    def extend(self, batch: Any) -> None:
        """Rows join with their caches made ragged (kv_rewind.py): each row of a speculating
        batch ends where its own accepted tokens end."""
        batch.prompt_cache = ragged(batch.prompt_cache)
        super().extend(batch)

    def next(self) -> list[Any]:
        if not self.uids:
            return []
        size, gate = len(self.uids), self.speculator.batch_gate
        responses = self._speculative_step() if gate.allows(size) else None
        verified = responses is not None
        if responses is None:
            responses = super().next()
        gate.ran(size, verified, len(responses))
        return responses

    def _speculative_step(self) -> list[Any] | None:
        """The step with the rows' proposals verified; None when no row proposes."""
        room = [m - n for m, n in zip(self.max_tokens, self._num_tokens, strict=True)]
        lengths = self.speculator.lengths(list(self.uids), room)
        if not any(lengths):
            return None
        mx.eval(self._next_tokens)
        pending = cast(list[int], self._next_tokens.tolist())
        proposals = self.speculator.propose(list(self.uids), self.tokens, pending, lengths)
        if not any(proposals):
            return None
        return self._verify(pending, proposals)

    def _verify(self, pending: list[int], proposals: list[list[int]]) -> list[Any]:
        width = 1 + max(len(p) for p in proposals)
        fed = [[t, *p] for t, p in zip(pending, proposals, strict=True)]
        # Rows with fewer proposals are padded with their own token; what the padding computes
        # is rejected with the rest.
        inputs = mx.array([row + [row[0]] * (width - len(row)) for row in fed], dtype=mx.uint32)
        previous_logprobs = self._next_logprobs
        self._current_tokens = self._next_tokens  # type: ignore[assignment]
        self._current_logprobs = previous_logprobs
        logits = self.model(inputs, cache=self.prompt_cache)
        samplers: list[Any] = self.samplers or [None] * len(self.uids)
        processors: list[Any] = self.logits_processors or [()] * len(self.uids)
        rows = [
            Row(
                logits=logits[i],
                proposals=proposals[i],
                sampler=self.fallback_sampler if samplers[i] is None else samplers[i],
                processors=processors[i] or (),
                context=self._token_context[i],
                fed=fed[i],
            )
            for i in range(len(self.uids))
        ]
        verdicts = verify_rows(rows)
        rewind(self.prompt_cache, [width - 1 - v.accepted for v in verdicts])
        self._next_tokens = mx.array([v.next_token for v in verdicts], dtype=mx.uint32)
        self._next_logprobs = [v.logprobs[v.accepted] for v in verdicts]
        responses: list[Any] = []
        keep: list[int] = []
        for i, verdict in enumerate(verdicts):
            kept = fed[i][: 1 + verdict.accepted]
            self.tokens[i].extend(kept)
            self.speculator.record(self.uids[i], len(proposals[i]), verdict.accepted)
            logprobs = [previous_logprobs[i], *verdict.logprobs[: verdict.accepted]]
            if self._respond(i, kept, logprobs, responses):
                keep.append(i)
        if len(keep) < len(self.uids):
            self.filter(keep)
        return responses

    def _respond(self, i: int, tokens: list[int], logprobs: list[mx.array], out: list[Any]) -> bool:
        """Row i's Responses for its returned tokens, token by token with upstream's end rules;
        False when the row ended (its cache cut to the tokens it returned)."""
        for j, (token, token_logprobs) in enumerate(zip(tokens, logprobs, strict=True)):
            finish_reason = None
            self._num_tokens[i] += 1
            if self._num_tokens[i] >= self.max_tokens[i]:
                finish_reason = "length"
            if self._matchers[i].advance(token):
                finish_reason = "stop"
            if finish_reason is None:
                out.append(self.Response(self.uids[i], token, token_logprobs, None, None, None))
                continue
            after = len(tokens) - 1 - j  # tokens fed after this one: not the row's any more
            all_tokens = self.tokens[i][: len(self.tokens[i]) - after]
            cache = trimmed(self.extract_cache(i), after)
            out.append(
                self.Response(self.uids[i], token, token_logprobs, finish_reason, cache, all_tokens)
            )
            return False
        return True
