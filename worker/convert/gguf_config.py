"""config.json and generation_config.json of a checkpoint converted from GGUF metadata.

Architectures: `llama` (Llama 1-3, Mistral 7B and SmolLM are all written as `llama` by
llama.cpp's converter: its q/k rows are permuted) and `qwen2` (q/k/v biases, NeoX RoPE: not
permuted). The hyperparameters are read from the `<arch>.*` keys llama.cpp writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.convert.errors import ConversionError
from worker.convert.gguf_tensors import GgufFile


@dataclass(frozen=True)
class Architecture:
    """A GGUF architecture this converter handles and its Hugging Face counterpart."""

    gguf_name: str
    model_type: str
    hf_class: str
    # llama.cpp permuted the rows of attn_q / attn_k (its RoPE rotates adjacent pairs).
    permuted_qk: bool


ARCHITECTURES = {
    arch.gguf_name: arch
    for arch in (
        Architecture("llama", "llama", "LlamaForCausalLM", permuted_qk=True),
        Architecture("qwen2", "qwen2", "Qwen2ForCausalLM", permuted_qk=False),
    )
}


@dataclass(frozen=True)
class Hyperparameters:
    """What the forward pass needs from the metadata."""

    n_layer: int
    hidden: int
    ffn: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rms_eps: float
    rope_theta: float
    context: int
    rope_scaling: dict[str, Any] | None


def architecture(source: GgufFile) -> Architecture:
    name = source.require("general.architecture")
    if name not in ARCHITECTURES:
        raise ConversionError(
            f"GGUF architecture {name!r} is not supported (supported: {', '.join(ARCHITECTURES)})"
        )
    return ARCHITECTURES[name]


def _single(value: Any, key: str) -> Any:
    # Some architectures store per-layer lists (e.g. head counts); these must be uniform here.
    if isinstance(value, list):
        if not value or any(v != value[0] for v in value):
            raise ConversionError(f"{key}: per-layer values {value} are not supported")
        return value[0]
    return value


def _float(value: Any) -> float:
    # GGUF stores float32: 1e-5 reads back as 9.999999747378752e-06. Seven significant digits
    # give the value the original config had (the same float32 once MLX casts it).
    return float(f"{float(value):.7g}")


def hyperparameters(source: GgufFile, arch: Architecture) -> Hyperparameters:
    prefix = arch.gguf_name

    def get(key: str, default: Any = None) -> Any:
        full = f"{prefix}.{key}"
        value = source.metadata.get(full, default) if default is not None else source.require(full)
        return _single(value, full)

    n_head = int(get("attention.head_count"))
    n_head_kv = int(get("attention.head_count_kv", n_head))
    hidden = int(get("embedding_length"))
    head_dim = int(get("attention.key_length", hidden // n_head))
    rope_dim = int(get("rope.dimension_count", head_dim))
    if rope_dim != head_dim:
        raise ConversionError(f"partial RoPE ({rope_dim} of {head_dim} dims) is not supported")
    return Hyperparameters(
        n_layer=int(get("block_count")),
        hidden=hidden,
        ffn=int(get("feed_forward_length")),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        rms_eps=_float(get("attention.layer_norm_rms_epsilon")),
        rope_theta=_float(get("rope.freq_base", 10000.0)),
        context=int(get("context_length", 2048)),
        rope_scaling=_rope_scaling(source, prefix),
    )


def _rope_scaling(source: GgufFile, prefix: str) -> dict[str, Any] | None:
    kind = source.metadata.get(f"{prefix}.rope.scaling.type", "none")
    factor = source.metadata.get(f"{prefix}.rope.scaling.factor")
    if kind == "none" and f"{prefix}.rope.scale_linear" in source.metadata:
        kind, factor = "linear", source.metadata[f"{prefix}.rope.scale_linear"]
    if kind == "none" or (kind == "linear" and factor in (None, 0.0, 1.0)):
        return None
    if kind == "linear":
        return {"type": "linear", "factor": _float(factor)}
    raise ConversionError(f"RoPE scaling {kind!r} is not supported (only linear)")


def special_ids(source: GgufFile) -> tuple[int | None, list[int]]:
    """(bos id, eos ids): the eos id first, then end-of-turn / end-of-message ids if distinct."""
    meta = source.metadata
    bos = meta.get("tokenizer.ggml.bos_token_id")
    eos: list[int] = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        value = meta.get(f"tokenizer.ggml.{key}")
        if value is not None and int(value) not in eos:
            eos.append(int(value))
    return (int(bos) if bos is not None else None), eos


def model_config(
    source: GgufFile, arch: Architecture, params: Hyperparameters, dtype: str
) -> dict[str, Any]:
    """config.json as transformers writes it for the architecture, from the metadata."""
    names = source.tensors
    embed = names.get("token_embd.weight")
    if embed is None:
        raise ConversionError("token_embd.weight is missing")
    bos, eos = special_ids(source)
    config: dict[str, Any] = {
        "architectures": [arch.hf_class],
        "model_type": arch.model_type,
        "hidden_act": "silu",
        "hidden_size": params.hidden,
        "intermediate_size": params.ffn,
        "num_hidden_layers": params.n_layer,
        "num_attention_heads": params.n_head,
        "num_key_value_heads": params.n_head_kv,
        "head_dim": params.head_dim,
        "rms_norm_eps": params.rms_eps,
        "rope_theta": params.rope_theta,
        "rope_scaling": params.rope_scaling,
        "max_position_embeddings": params.context,
        "vocab_size": embed.shape[0],
        # llama.cpp drops output.weight when it equals the embedding (tied embeddings).
        "tie_word_embeddings": "output.weight" not in names,
        "torch_dtype": dtype,
    }
    if arch.model_type == "llama":
        config["attention_bias"] = "blk.0.attn_q.bias" in names
        config["mlp_bias"] = "blk.0.ffn_up.bias" in names
    if bos is not None:
        config["bos_token_id"] = bos
    if eos:
        config["eos_token_id"] = eos[0] if len(eos) == 1 else eos
    return config


# GGUF sampling keys (llama.cpp's general.sampling.*) -> generation_config.json fields.
SAMPLING_KEYS = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_k": "top_k",
    "general.sampling.top_p": "top_p",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repetition_penalty",
}


def generation_config(source: GgufFile) -> dict[str, Any] | None:
    """generation_config.json from the special ids (and sampling defaults, when the file has
    them); None when the metadata names no eos token."""
    bos, eos = special_ids(source)
    if not eos:
        return None
    config: dict[str, Any] = {"eos_token_id": eos[0] if len(eos) == 1 else eos}
    if bos is not None:
        config["bos_token_id"] = bos
    pad = source.metadata.get("tokenizer.ggml.padding_token_id")
    if pad is not None:
        config["pad_token_id"] = int(pad)
    for key, field in SAMPLING_KEYS.items():
        if key in source.metadata:
            value = source.metadata[key]
            config[field] = _float(value) if isinstance(value, float) else value
    if "temperature" in config:
        config["do_sample"] = config["temperature"] > 0
    return config
