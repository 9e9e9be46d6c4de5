"""The mlx-lm logits processor that enforces a grammar (and a thinking budget) on one request.

mlx-lm calls a logits processor as `processor(tokens, logits) -> logits` once per generated
token, with `tokens` the request's prompt and everything generated so far (`generate_step`) or
the sequence's token context (`BatchGenerator`, one processor list per sequence). The first
call comes before any token was generated, so the length seen then marks where generated
tokens begin; each later call consumes the tokens appended since, then masks the logits:

- while the response is thinking (ThinkGate), nothing is masked, except that past the thinking
  budget only the end-of-thinking token is allowed (harmony's analysis message is part of its
  grammar, HarmonyGate, so only the budget applies there);
- on the first token of a reasoning-capable response, the grammar's tokens and the
  start-of-thinking token are allowed;
- otherwise only the tokens the grammar allows: llguidance computes the mask as a bitmask (one
  bit per token id, in Rust), unpacked by numpy and applied with one `mx.where`, so the
  Python work per token is a few calls. When the grammar is complete the mask holds only EOS, which ends the response;
- a lazy grammar (bare_calls.py) has no matcher until the response opens a call; then it
  masks as above;
- in the last tokens of max_tokens, the answer is steered to its end (close_out.py) and
  `closed_out` is set, so that the response reports "length".
"""

from __future__ import annotations

import logging
from typing import Any

import mlx.core as mx
import numpy as np

from worker.text.constraints import close_out
from worker.text.constraints.think_gate import HarmonyGate, ThinkGate

log = logging.getLogger(__name__)


class ConstraintProcessor:
    """Per-request state: an llguidance matcher (or None: budget only) and a ThinkGate."""

    def __init__(
        self,
        matcher: Any | None,
        vocab_words: int,
        eos_ids: list[int],
        gate: ThinkGate | HarmonyGate | None = None,
        thinking_budget: int | None = None,
        max_tokens: int | None = None,
        close_candidates: close_out.CloseOut | None = None,
        trigger: Any | None = None,
    ) -> None:
        self._matcher = matcher
        self._trigger = trigger  # bare_calls.BareCallTrigger: the matcher comes when it fires
        self._gate = gate
        self._budget = thinking_budget
        self._eos_ids = eos_ids
        self._words = np.zeros(vocab_words, dtype=np.uint32)
        self._base: int | None = None  # tokens.size at the first call
        self._consumed = 0
        self._failed = False
        self._max_tokens = max_tokens
        self._reserve = close_out.reserve_for(max_tokens) if max_tokens else 0
        self._close_candidates = close_candidates
        self.closed_out = False  # the answer was steered to its end before max_tokens

    @property
    def guards_only(self) -> bool:
        """Only a lazy grammar not yet fired: nothing the request itself asked for."""
        return (
            self._trigger is not None
            and self._matcher is None
            and self._gate is None
            and self._budget is None
        )

    @property
    def inert(self) -> bool:
        """Masks nothing now or later (a lazy grammar switched off): callers may skip it."""
        trigger = self._trigger
        return self.guards_only and trigger is not None and trigger.state == "off"

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if self.inert:  # nothing to read or mask any more: skip slicing the tokens
            return logits
        if self._base is None:
            self._base = tokens.size
        else:
            start = self._base + self._consumed
            if tokens.size > start:
                new = tokens[start:].tolist()
                self._consumed += len(new)
                for token in new:
                    self._advance(int(token))
        return self._mask(logits)

    def _advance(self, token: int) -> None:
        if self._gate is not None and not self._gate.advance(token):
            return
        if self._matcher is None and self._trigger is not None:
            self._matcher = self._trigger.advance(token)  # consumed `token` when it fires
            return
        if self._matcher is not None and not self._failed:
            if not self._matcher.consume_token(token):
                # Only reachable if the mask was bypassed; end the response rather than loop.
                log.warning("constraint broken at token %d: %s", token, self._matcher.get_error())
                self._failed = True

    def _mask(self, logits: mx.array) -> mx.array:
        gate = self._gate
        end_thinking = False  # a harmony analysis past the budget: end it once the grammar may
        if gate is not None and gate.state == "inside":
            spent = self._budget is not None and gate.thinking_tokens >= self._budget
            if isinstance(gate, ThinkGate) or self._matcher is None:
                # Thinking is free text (a harmony grammar, when there is one, covers it).
                return self._only([gate.end_id], logits) if spent else logits
            end_thinking = spent
        if self._matcher is None:
            return logits
        if self._failed:
            return self._only(self._eos_ids, logits)
        words = self._words
        self._matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
        if end_thinking:
            # Not inside a character split across byte tokens: `<|end|>` once the grammar allows.
            assert gate is not None
            end = gate.end_id
            if words[end >> 5] & np.uint32(1 << (end & 31)):
                return self._only([end], logits)
            return _apply_bitmask(words, logits)
        if isinstance(gate, ThinkGate) and gate.state == "maybe":
            words[gate.start_id >> 5] |= np.uint32(1 << (gate.start_id & 31))
        elif (
            self._close_candidates is not None
            and self._max_tokens
            and self._max_tokens - self._consumed <= self._reserve
        ):
            token = close_out.pick(words, self._close_candidates)
            if token is not None:
                # Ending where the answer is already complete is not cutting it short.
                self.closed_out = self.closed_out or token not in self._eos_ids
                return self._only([token], logits)
        return _apply_bitmask(words, logits)

    def _only(self, token_ids: list[int], logits: mx.array) -> mx.array:
        words = np.zeros_like(self._words)
        for token in token_ids:
            words[token >> 5] |= np.uint32(1 << (token & 31))
        return _apply_bitmask(words, logits)


def _apply_bitmask(words: np.ndarray, logits: mx.array) -> mx.array:
    """Logits with every token whose bit is 0 (and every id past the mask) set to -inf."""
    width = logits.shape[-1]
    # numpy unpacks the bits faster than the equivalent MLX ops on small arrays (measured).
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    if bits.size >= width:
        bits = bits[:width]
    else:
        bits = np.concatenate([bits, np.zeros(width - bits.size, dtype=bits.dtype)])
    return mx.where(mx.array(bits.view(np.bool_)), logits, mx.array(-mx.inf, dtype=logits.dtype))
