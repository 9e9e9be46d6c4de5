"""Constrained decoding: grammars from response_format and forced tool calls, enforced per token.

`grammars` turns a request's constraint into an llguidance grammar (a 400 when it cannot be
enforced), `llg` holds the llguidance side (tokenizer view, compile), `processor` is the mlx-lm
logits processor that masks each step, `think_gate` keeps the grammar off the reasoning text.
Why llguidance: docs/structured-output.md.
"""
