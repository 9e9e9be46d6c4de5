"""A tiny Qwen3 that answers every chat turn with a fixed script and then ends the turn.

"qwen3_scripted" is for the client tier (tests/clients/): real agents and SDKs need a model
that finishes its turns (a random-weight model never emits EOS) and that takes their long
prompts (Claude Code's is tens of thousands of tokens) in seconds on a CPU.

It is an ordinary Qwen3 checkpoint (config.json, model.safetensors, the Qwen3 tokenizer and
chat template with tools) whose weights are designed, not random. It has one layer, and its
MLP writes nothing back (down_proj is zero), so the next token is a function of the current
token plus one feature that attention may add:

- a Markov chain written into the embedding and lm_head weights. Each chain state (a token)
  has a one-hot embedding dimension of its own whose lm_head entries give its successors their
  logits (`CHAIN_LOGIT`). After the generation prompt's last token ("assistant\\n") the model
  thinks `THINKING` in a <think> block and answers `ANSWER`, then <|im_end|>; after a prompt
  that ends in an empty think block ("</think>\\n\\n": thinking off) it answers `ANSWER` at once.
- a prior: a dimension that is 1 in every embedding, whose lm_head column ranks EOS first, then
  the tool-call markers, then the JSON closers, separators and minimal values
  (worker/text/constraints/close_out.py's list, string closers first). A token outside the
  chain is followed by EOS, and a grammar (a forced tool call, a response_format) that rules
  out the chain's next token gets the shortest valid JSON, then EOS.
- a tool call in auto mode: the generation prompt's last token has a second successor,
  <tool_call> (`TOOL_CALL_LOGIT`, just below <think>), which starts a call of the `llm` CLI's
  built-in tool `llm_time` (`TOOL_NAME`). A request that bans <think> (logit_bias -100) gets that
  call: the only way a client without tool_choice (the `llm` CLI) can make this model use a tool.
- tool results: the one attention head attends only to <tool_response> (its key and value are
  zero for every other token, its query the same at every position, RoPE's slowest pair with a
  large rope_theta) and writes a "tool result seen" dimension, which adds `RESULT_LOGIT` to
  <think>: after a tool result the model answers even where <think> is banned, so a tool loop
  ends after one call.

The logit gaps are wide enough that sampling at any usual temperature gives the same text as
greedy decoding. A 64-wide residual stream, one head of `HEAD_DIM` and a 16K vocabulary make a
100K-token prompt prefill in well under a second on two CPU cores; the context is
`MAX_POSITIONS`.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors.numpy import save_file

from worker.tiny_models.text import Dims, TokenId, qwen3_config
from worker.tiny_models.tokenizer import (
    QWEN2,
    id_of,
    qwen_tokenizer,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

if TYPE_CHECKING:
    from worker.tiny_models.arch import Arch

THINKING = "Let me think"
ANSWER = "Hello from a tiny model."
# The call between <tool_call> and </tool_call>: its JSON repeats `"` too often for a Markov
# chain over this vocabulary, so the pieces around the name are added tokens of their own.
CALL_OPEN, TOOL_NAME, CALL_CLOSE = '{"name": "', "llm_time", '", "arguments": {}}'
TOKENIZER = qwen_tokenizer(
    (*QWEN2.added_tokens, (CALL_OPEN, False), (CALL_CLOSE, False)), QWEN2.chat_template
)
HEAD_DIM = 16
MAX_POSITIONS = 131072
# Logits (with the final norm's scale folded in). A chain successor gets CHAIN_LOGIT in all;
# the tool-call branch TOOL_CALL_LOGIT (so <think> - 100 loses to it); a tool result adds
# RESULT_LOGIT to <think>. The prior's ranks are PRIOR_STEP apart, from EOS down to 0 (every
# unranked token): at temperature 1 a lower rank is sampled with probability below e^-20.
CHAIN_LOGIT = 1000.0
TOOL_CALL_LOGIT = 950.0
RESULT_LOGIT = 150.0
PRIOR_STEP = 20.0
# After EOS, the chat markers and the JSON pieces close_out.py prefers, with everything that
# closes a string first: inside a string `}]` is content, so ranking it above `"` would
# never end the string.
PRIOR_TEXT = (
    "</tool_call>",
    "<tool_call>",
    "</think>",
    *('"}}', '"}', '"]', '"', ' ""', ' "'),
    *("}}", "]}", "}]", "]]", "}", "]"),
    *(", ", ",", ": ", ":"),
    *('""', "0", "null", "false", "{}", "[]", "[", "{"),
)
# Embedding dimensions: every token has 1 in BIAS and 1 in exactly one other (FILLER, the
# <tool_response> marker's or its chain state's), so RMSNorm scales all of them alike.
BIAS, FILLER, RESULT, RESULT_MARKER, FIRST_STATE = 0, 1, 2, 3, 4
# RoPE rotates this query/key pair slowest; rope_theta makes it ~1e-7 radians per position.
ATTN_DIM = HEAD_DIM // 2 - 1
ROPE_THETA = 1e8
ATTN_SCORE = 64.0  # the attention logit of a <tool_response> (every other token's: 0)

SIZES: Mapping[str, Dims] = {
    "tiny": Dims(
        hidden=64,
        layers=1,
        heads=1,
        kv_heads=1,
        intermediate=64,
        vocab=16384,
        max_positions=MAX_POSITIONS,
    ),
}


def config(d: Dims, tid: TokenId) -> dict[str, Any]:
    return {
        **qwen3_config(d, tid),
        "head_dim": HEAD_DIM,
        "rope_theta": ROPE_THETA,
        "tie_word_embeddings": False,
    }


def transitions(tok: Any) -> list[tuple[int, int, float]]:
    """(token, next token, logit) of the script: a Markov chain, so no state repeats."""
    tid = id_of(tok)
    prompt_end = tok.encode("<|im_start|>assistant\n", add_special_tokens=False).ids[-1]
    no_think_end = tok.encode("<think>\n\n</think>\n\n", add_special_tokens=False).ids[-1]
    eos = tid("<|im_end|>")
    used = {prompt_end, no_think_end, tid("<tool_response>")}
    markers = ("<think>", "</think>", "<tool_call>", "</tool_call>", CALL_OPEN, CALL_CLOSE)
    used |= {tid(t) for t in markers}
    thinking = distinct_tokens(tok, THINKING, used)
    answer = distinct_tokens(tok, ANSWER, used)
    name = distinct_tokens(tok, TOOL_NAME, used)
    answer = [prompt_end, tid("<think>"), *thinking, tid("</think>"), no_think_end, *answer, eos]
    call = [tid("<tool_call>"), tid(CALL_OPEN), *name, tid(CALL_CLOSE), tid("</tool_call>"), eos]
    edges = [(a, b, CHAIN_LOGIT) for seq in (answer, call) for a, b in pairwise(seq)]
    edges.append((prompt_end, call[0], TOOL_CALL_LOGIT))
    return edges


def distinct_tokens(tok: Any, text: str, used: set[int]) -> list[int]:
    """A spelling of `text` in vocabulary tokens none of which is in `used` or repeats (longest
    pieces first, so mostly the tokenizer's own); adds them to `used`."""
    pieces: dict[str, int] = {}
    for token_id in range(tok.get_vocab_size()):
        piece = tok.decode([token_id])
        if piece and piece in text and tok.id_to_token(token_id) == piece.replace(" ", "Ġ"):
            pieces.setdefault(piece, token_id)
    longest = max(map(len, pieces))

    def spell(start: int) -> list[int] | None:
        if start == len(text):
            return []
        for end in range(min(len(text), start + longest), start, -1):
            token_id = pieces.get(text[start:end])
            if token_id is None or token_id in used:
                continue
            used.add(token_id)
            rest = spell(end)
            if rest is not None:
                return [token_id, *rest]
            used.discard(token_id)
        return None

    spelled = spell(0)
    if spelled is None:
        raise RuntimeError(f"{text!r} cannot be spelled in distinct tokens of this vocabulary")
    return spelled


def prior(tok: Any) -> dict[int, float]:
    """Token id -> its default logit (every other token: 0)."""
    ranked = [tok.token_to_id("<|im_end|>")]
    for text in PRIOR_TEXT:
        ids = tok.encode(text, add_special_tokens=False).ids
        if len(ids) == 1 and ids[0] not in ranked:
            ranked.append(ids[0])
    return {token: PRIOR_STEP * (len(ranked) - rank) for rank, token in enumerate(ranked)}


def weights(d: Dims, tok: Any) -> dict[str, np.ndarray]:
    edges = transitions(tok)
    states = list(dict.fromkeys(a for a, _, _ in edges))
    if FIRST_STATE + len(states) > d.hidden:
        raise RuntimeError(f"{len(states)} chain states do not fit a {d.hidden}-wide embedding")
    marker = tok.token_to_id("<tool_response>")
    embed = np.zeros((d.vocab, d.hidden), dtype=np.float32)
    embed[:, BIAS] = 1.0
    embed[:, FILLER] = 1.0
    embed[marker, [FILLER, RESULT_MARKER]] = [0.0, 1.0]
    state_dim = {token: FIRST_STATE + k for k, token in enumerate(states)}
    for token, dim in state_dim.items():
        embed[token, [FILLER, dim]] = [0.0, 1.0]
    # RMSNorm (weight 1) maps an embedding's two ones to sqrt(hidden / 2) each; the attention
    # adds a RESULT of 1 (before the final norm), which scales every logit alike.
    unit = np.float32((d.hidden / 2) ** 0.5)
    lm_head = np.zeros((d.vocab, d.hidden), dtype=np.float32)
    base = prior(tok)
    for token, logit in base.items():
        lm_head[token, BIAS] = logit / unit
    for state, successor, logit in edges:
        lm_head[successor, state_dim[state]] = (logit - base.get(successor, 0.0)) / unit
    lm_head[tok.token_to_id("<think>"), RESULT] = RESULT_LOGIT / unit

    out: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": np.ones(d.hidden, dtype=np.float32),
        "lm_head.weight": lm_head,
    }
    q_out, kv_out = d.heads * HEAD_DIM, d.kv_heads * HEAD_DIM
    # q_norm / k_norm bring a lone query or key component to sqrt(HEAD_DIM) times their
    # weight; the score is q . k / sqrt(HEAD_DIM).
    qk_gain = (ATTN_SCORE / HEAD_DIM**0.5) ** 0.5
    for i in range(d.layers):
        p = f"model.layers.{i}."
        q = np.zeros((q_out, d.hidden), dtype=np.float32)
        q[ATTN_DIM, BIAS] = 1.0
        k = np.zeros((kv_out, d.hidden), dtype=np.float32)
        k[ATTN_DIM, RESULT_MARKER] = 1.0
        v = np.zeros((kv_out, d.hidden), dtype=np.float32)
        v[0, RESULT_MARKER] = 1.0 / unit
        o = np.zeros((d.hidden, q_out), dtype=np.float32)
        o[RESULT, 0] = 1.0
        out |= {
            p + "self_attn.q_proj.weight": q,
            p + "self_attn.k_proj.weight": k,
            p + "self_attn.v_proj.weight": v,
            p + "self_attn.o_proj.weight": o,
            p + "self_attn.q_norm.weight": np.full(HEAD_DIM, qk_gain, dtype=np.float32),
            p + "self_attn.k_norm.weight": np.full(HEAD_DIM, qk_gain, dtype=np.float32),
            p + "input_layernorm.weight": np.ones(d.hidden, dtype=np.float32),
            p + "post_attention_layernorm.weight": np.ones(d.hidden, dtype=np.float32),
            # The MLP computes as in any model but writes nothing back.
            p + "mlp.down_proj.weight": np.zeros((d.hidden, d.intermediate), dtype=np.float32),
        }
        for name in ("mlp.gate_proj.weight", "mlp.up_proj.weight"):
            rng = np.random.default_rng([0, zlib.crc32((p + name).encode())])
            shape = (d.intermediate, d.hidden)
            out[p + name] = rng.standard_normal(shape, dtype=np.float32) * d.hidden**-0.5
    return out


def build(arch: Arch, dims: Dims, out_dir: Path) -> int:
    """Write the checkpoint into `out_dir`; return its parameters (Arch.build's signature)."""
    tok = train_tokenizer(arch.tokenizer, dims.vocab)
    write_tokenizer_files(arch.tokenizer, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", arch.config(dims, id_of(tok)))
    write_json(out_dir / "generation_config.json", arch.generation_config(id_of(tok)))
    tensors = weights(dims, tok)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
