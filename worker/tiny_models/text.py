"""The decoder-only text checkpoints (Qwen3, Llama) and the weight recipe other builders share.

Weights are random but deterministic (fixed seed per tensor name). The output-embedding rows of
every added token (EOS, chat markers, <think>, ...) are zero, so their logit is exactly 0 while
ordinary tokens' logits spread with a standard deviation of about `LOGIT_STD`: a random model
then practically never ends or opens a think block on its own, which makes generation lengths
deterministic (a client can still force EOS through a logit bias).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors.numpy import save_file

from worker.tiny_models.tokenizer import id_of, train_tokenizer, write_json, write_tokenizer_files

if TYPE_CHECKING:
    from worker.tiny_models.arch import Arch

SEED = 0
# Standard deviation of ordinary tokens' logits: large enough that a zeroed (logit 0) special
# token is sampled with negligible probability even at temperature 1 (measured: ~1e-7 a step).
LOGIT_STD = 4.0
# Extra scale of the projections that write into the residual stream (o_proj, down_proj), so it
# is dominated by what attention gathered from the prompt rather than by the current token's own
# embedding: with tied embeddings that term makes greedy decoding repeat one token forever.
RESIDUAL_GAIN = 4.0


TokenId = Callable[[str], int]


@dataclass(frozen=True)
class Dims:
    """Shape of a decoder-only transformer."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# ~0.8M params (qwen3): loads and generates in milliseconds.
_TINY = Dims(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, vocab=4096)
# ~20M params (qwen3), float32: a benchmark model whose decode is compute-bound on a CPU.
_20M = Dims(hidden=384, layers=8, heads=6, kv_heads=2, intermediate=1536, vocab=8192)
SIZES: Mapping[str, Dims] = {
    "tiny": _TINY,
    # With a 64K context: prefill at agent sizes in seconds (scripts/bench_prefill.py).
    "tiny-64k": replace(_TINY, max_positions=65536),
    "20m": _20M,
    # With a 64K context: agent sessions of 25K-50K tokens (scripts/bench_agent_session.py).
    "20m-64k": replace(_20M, max_positions=65536),
}


def qwen3_config(d: Dims, tid: TokenId) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tid("<|endoftext|>"),
        "eos_token_id": tid("<|im_end|>"),
        "head_dim": d.head_dim,
        "hidden_act": "silu",
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": d.intermediate,
        "max_position_embeddings": d.max_positions,
        "max_window_layers": d.layers,
        "model_type": "qwen3",
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": d.vocab,
    }


def qwen2_config(d: Dims, tid: TokenId) -> dict[str, Any]:
    """Qwen2: Qwen3 without the q/k norms, with q/k/v biases (zero here); mlx-lm pipelines it."""
    return qwen3_config(d, tid) | {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}


def qwen_generation_config(
    tid: TokenId, temperature: float, top_p: float, top_k: int
) -> dict[str, Any]:
    """generation_config.json of a Qwen checkpoint (text, VL, Omni): its token ids and sampling."""
    return {
        "bos_token_id": tid("<|endoftext|>"),
        "do_sample": True,
        "eos_token_id": [tid("<|im_end|>"), tid("<|endoftext|>")],
        "pad_token_id": tid("<|endoftext|>"),
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
    }


def qwen3_generation_config(tid: TokenId) -> dict[str, Any]:
    # Qwen3's published sampling defaults (thinking mode).
    return qwen_generation_config(tid, temperature=0.6, top_p=0.95, top_k=20)


def llama_config(d: Dims, tid: TokenId) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tid("<|begin_of_text|>"),
        "eos_token_id": tid("<|eot_id|>"),
        "head_dim": d.head_dim,
        "hidden_act": "silu",
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": d.intermediate,
        "max_position_embeddings": d.max_positions,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 500000.0,
        # Untied (like Llama-3-8B), so the separate lm_head.weight path is exercised too.
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": d.vocab,
    }


def llama_generation_config(tid: TokenId) -> dict[str, Any]:
    return {
        "bos_token_id": tid("<|begin_of_text|>"),
        "do_sample": True,
        "eos_token_id": [tid("<|end_of_text|>"), tid("<|eot_id|>")],
        "temperature": 0.6,
        "top_p": 0.9,
    }


def decoder_weights(config: Mapping[str, Any], zero_rows: list[int]) -> dict[str, np.ndarray]:
    """Random float32 weights named like a Hugging Face Llama/Qwen3 checkpoint.

    Linear layers are N(0, 1/fan_in) (times RESIDUAL_GAIN where they write into the residual
    stream), so greedy text depends on the whole prompt and varies instead of looping on one
    token.
    `zero_rows` are zeroed in the output embedding (tied: embed_tokens; else lm_head).
    """
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    head_dim, inter = config["head_dim"], config["intermediate_size"]
    q_out = config["num_attention_heads"] * head_dim
    kv_out = config["num_key_value_heads"] * head_dim
    embed_std = LOGIT_STD / hidden**0.5
    # name -> (shape, std); std None means a norm weight (ones).
    specs: dict[str, tuple[tuple[int, ...], float | None]] = {
        "model.embed_tokens.weight": ((vocab, hidden), embed_std),
        "model.norm.weight": ((hidden,), None),
    }
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs |= {
            p + "input_layernorm.weight": ((hidden,), None),
            p + "post_attention_layernorm.weight": ((hidden,), None),
            p + "self_attn.q_proj.weight": ((q_out, hidden), hidden**-0.5),
            p + "self_attn.k_proj.weight": ((kv_out, hidden), hidden**-0.5),
            p + "self_attn.v_proj.weight": ((kv_out, hidden), hidden**-0.5),
            p + "self_attn.o_proj.weight": ((hidden, q_out), RESIDUAL_GAIN * q_out**-0.5),
            p + "mlp.gate_proj.weight": ((inter, hidden), hidden**-0.5),
            p + "mlp.up_proj.weight": ((inter, hidden), hidden**-0.5),
            p + "mlp.down_proj.weight": ((hidden, inter), RESIDUAL_GAIN * inter**-0.5),
        }
        if config["model_type"] == "qwen3":
            specs[p + "self_attn.q_norm.weight"] = ((head_dim,), None)
            specs[p + "self_attn.k_norm.weight"] = ((head_dim,), None)
        if config["model_type"] == "qwen2":
            for name, width in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                specs[p + f"self_attn.{name}_proj.bias"] = ((width,), 0.0)
    output_name = "model.embed_tokens.weight"
    if not config["tie_word_embeddings"]:
        output_name = "lm_head.weight"
        specs[output_name] = ((vocab, hidden), embed_std)

    weights = {name: random_tensor(name, shape, std) for name, (shape, std) in specs.items()}
    weights[output_name][zero_rows] = 0.0
    return weights


def random_tensor(name: str, shape: tuple[int, ...], std: float | None) -> np.ndarray:
    if std is None:
        return np.ones(shape, dtype=np.float32)
    # Seeded by name, so a tensor's values do not depend on which other tensors exist.
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def build_text_decoder(arch: Arch, dims: Dims, out_dir: Path) -> int:
    """Write a decoder-only text checkpoint for `arch` into `out_dir`; return its parameters."""
    tok = train_tokenizer(arch.tokenizer, dims.vocab)
    tid = id_of(tok)
    config = arch.config(dims, tid)
    added_ids = [tid(content) for content, _ in arch.tokenizer.added_tokens]
    write_tokenizer_files(arch.tokenizer, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", arch.generation_config(tid))
    weights = decoder_weights(config, zero_rows=added_ids)
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())
