"""Tiny GGUF files laid out as llama.cpp's converter writes them, and llama.cpp's forward pass.

`write_tiny_gguf` trains a small byte-level BPE (special tokens first, as SmolLM2 has them),
draws random Hugging Face-layout weights, permutes the q/k rows for `llama` as llama.cpp does
(for its pair-wise RoPE), quantizes each tensor to the type asked for and writes the file with
`gguf.GGUFWriter`. `reference_logits` reads the file back with `gguf` alone and runs the model
as llama.cpp would, in float64: RoPE on adjacent pairs of the permuted rows for `llama`, on
halves for `qwen2`. A converted checkpoint matches it only if the permutation was undone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CORPUS = (
    "The capital of France is Paris. Paris is a city on the Seine, 2,100,000 people live "
    "there in 2024. Hello world! It's a test: the quick brown fox jumps over the lazy dog; "
    "we'll see what they've done. def main():\n    return 42\n\nCafé déjà vu, naïve façade. "
    "日本語のテキスト。 Ünïcödé ümläuts and emoji 🙂 too.\n"
) * 4


@dataclass(frozen=True)
class TinyModel:
    """Shape and on-disk choices of a tiny GGUF model."""

    arch: str = "llama"  # "llama" (permuted q/k) or "qwen2" (biases, NeoX RoPE)
    pre: str = "smollm"  # tokenizer.ggml.pre
    hidden: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    ffn: int = 128
    vocab_size: int = 400
    tied: bool = True
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    add_bos: bool = False
    # GGUF tensor base name -> GGML type name; the rest are F32.
    types: dict[str, str] = field(
        default_factory=lambda: {
            "token_embd": "Q8_0",
            "attn_q": "Q4_0",
            "attn_k": "Q4_1",
            "attn_v": "F16",
            "attn_output": "Q8_0",
            "ffn_gate": "Q4_1",
            "ffn_up": "Q4_0",
            "ffn_down": "F16",
            "output": "Q8_0",
        }
    )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_head


def pre_tokenizer(pre: str) -> Any:
    """The Hugging Face pre-tokenizer the original tokenizer of a `pre` name has."""
    from tokenizers import Regex, pre_tokenizers

    # The real checkpoints' regexes, as the project's tiny checkpoints copy them (not the
    # converter's own constants: the test compares the two).
    from worker.tiny_models.tokenizer import LLAMA3_PRETOKENIZE_REGEX, QWEN2_PRETOKENIZE_REGEX

    if pre == "smollm":
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
            ]
        )
    regex = {"llama-bpe": LLAMA3_PRETOKENIZE_REGEX, "qwen2": QWEN2_PRETOKENIZE_REGEX}.get(pre)
    if regex is None:
        return pre_tokenizers.ByteLevel(add_prefix_space=False)
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def train_tokenizer(spec: TinyModel) -> Any:
    """A byte-level BPE of `spec.vocab_size` ids, special tokens first (ids 0, 1, 2)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    if spec.pre == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizer(spec.pre)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([CORPUS], trainer)
    return tok


def hf_weights(spec: TinyModel, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights under Hugging Face names (before llama.cpp's permutation)."""
    rng = np.random.default_rng(seed)
    d, hd, f = spec.hidden, spec.head_dim, spec.ffn
    vocab = spec.vocab_size

    def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"model.embed_tokens.weight": rand(vocab, d, scale=0.5)}
    w["model.norm.weight"] = 1.0 + rand(d, scale=0.1)
    if not spec.tied:
        w["lm_head.weight"] = rand(vocab, d, scale=d**-0.5)
    for i in range(spec.n_layer):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + rand(d, scale=0.1)
        w[p + "post_attention_layernorm.weight"] = 1.0 + rand(d, scale=0.1)
        w[p + "self_attn.q_proj.weight"] = rand(spec.n_head * hd, d, scale=d**-0.5)
        w[p + "self_attn.k_proj.weight"] = rand(spec.n_head_kv * hd, d, scale=d**-0.5)
        w[p + "self_attn.v_proj.weight"] = rand(spec.n_head_kv * hd, d, scale=d**-0.5)
        w[p + "self_attn.o_proj.weight"] = rand(d, spec.n_head * hd, scale=d**-0.5)
        if spec.arch == "qwen2":
            w[p + "self_attn.q_proj.bias"] = rand(spec.n_head * hd, scale=0.1)
            w[p + "self_attn.k_proj.bias"] = rand(spec.n_head_kv * hd, scale=0.1)
            w[p + "self_attn.v_proj.bias"] = rand(spec.n_head_kv * hd, scale=0.1)
        w[p + "mlp.gate_proj.weight"] = rand(f, d, scale=d**-0.5)
        w[p + "mlp.up_proj.weight"] = rand(f, d, scale=d**-0.5)
        w[p + "mlp.down_proj.weight"] = rand(d, f, scale=f**-0.5)
    return w


def llama_cpp_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter: each head's rows from [half; half] to interleaved pairs."""
    return (
        weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


GGUF_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf: str) -> tuple[str, str]:
    """(GGUF name, GGUF base name) of a Hugging Face tensor name."""
    stem, suffix = hf.rsplit(".", 1)
    if stem.startswith("model.layers."):
        _, _, index, rest = stem.split(".", 3)
        base = GGUF_NAMES[rest]
        return f"blk.{index}.{base}.{suffix}", base
    base = GGUF_NAMES[stem]
    return f"{base}.{suffix}", base


def write_tiny_gguf(path: Path, spec: TinyModel, seed: int = 0) -> dict[str, Any]:
    """Write the GGUF file; return {"tokenizer": the original tokenizers.Tokenizer,
    "weights": the Hugging Face float32 weights before permutation and quantization}."""
    import gguf

    tok = train_tokenizer(spec)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    assert [i for _, i in vocab] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    spec = replace(spec, vocab_size=len(tokens))
    weights = hf_weights(spec, seed)

    writer = gguf.GGUFWriter(str(path), spec.arch)
    writer.add_name("tiny")
    writer.add_block_count(spec.n_layer)
    writer.add_context_length(256)
    writer.add_embedding_length(spec.hidden)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_layer_norm_rms_eps(spec.rms_eps)
    writer.add_rope_freq_base(spec.rope_theta)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(spec.pre)
    writer.add_token_list(tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens]
    )
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|im_start|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_unk_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(spec.add_bos)
    writer.add_chat_template(CHATML_TEMPLATE)
    writer.add_float32("general.sampling.temp", 0.6)
    for hf, value in weights.items():
        name, base = gguf_name(hf)
        if spec.arch == "llama" and base in ("attn_q", "attn_k"):
            value = llama_cpp_permute(value, spec.n_head if base == "attn_q" else spec.n_head_kv)
        qtype = gguf.GGMLQuantizationType[spec.types.get(base, "F32") if value.ndim == 2 else "F32"]
        writer.add_tensor(name, gguf.quants.quantize(value, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"tokenizer": tok, "weights": weights, "spec": spec}


def read_source(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(metadata, tensors as float64 in the file's own layout) read with `gguf` alone."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items()}
    tensors = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        tensors[t.name] = np.asarray(values, dtype=np.float64).reshape(shape)
    return meta, tensors


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope(x: np.ndarray, theta: float, pairs: bool) -> np.ndarray:
    """x: (heads, seq, head_dim). `pairs`: llama.cpp's normal mode (dims 2i, 2i+1 rotate
    together); else NeoX mode (dims i, i + d/2)."""
    _, seq, dim = x.shape
    freqs = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    angle = np.arange(seq, dtype=np.float64)[:, None] * freqs[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    if pairs:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    a, b = x[..., : dim // 2], x[..., dim // 2 :]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _block(x: np.ndarray, w: dict[str, np.ndarray], meta: dict[str, Any]) -> np.ndarray:
    """One llama.cpp transformer block; `w` holds the block's tensors without "blk.N."."""
    arch = meta["general.architecture"]
    n_head = meta[f"{arch}.attention.head_count"]
    n_kv = meta[f"{arch}.attention.head_count_kv"]
    eps = meta[f"{arch}.attention.layer_norm_rms_epsilon"]
    theta = meta[f"{arch}.rope.freq_base"]
    seq = x.shape[0]

    def proj(h: np.ndarray, name: str, heads: int) -> np.ndarray:
        y = h @ w[f"{name}.weight"].T + w.get(f"{name}.bias", 0.0)
        return y.reshape(seq, heads, -1).transpose(1, 0, 2)

    h = _rms_norm(x, w["attn_norm.weight"], eps)
    q, k, v = (proj(h, "attn_q", n_head), proj(h, "attn_k", n_kv), proj(h, "attn_v", n_kv))
    pairs = arch == "llama"  # llama.cpp's normal RoPE; qwen2 uses the NeoX kind
    q, k = _rope(q, theta, pairs), _rope(k, theta, pairs)
    k, v = np.repeat(k, n_head // n_kv, axis=0), np.repeat(v, n_head // n_kv, axis=0)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    scores = scores + np.triu(np.full((seq, seq), -np.inf), k=1)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = (scores / scores.sum(axis=-1, keepdims=True)) @ v
    x = x + attn.transpose(1, 0, 2).reshape(seq, -1) @ w["attn_output.weight"].T
    h = _rms_norm(x, w["ffn_norm.weight"], eps)
    gate = h @ w["ffn_gate.weight"].T
    return x + (gate / (1 + np.exp(-gate)) * (h @ w["ffn_up.weight"].T)) @ w["ffn_down.weight"].T


def reference_logits(path: Path, token_ids: list[int]) -> np.ndarray:
    """Logits (seq, vocab) of `token_ids` computed from the GGUF file's tensors as llama.cpp
    runs them (float64)."""
    meta, t = read_source(path)
    arch = meta["general.architecture"]
    x = t["token_embd.weight"][token_ids]
    for i in range(meta[f"{arch}.block_count"]):
        prefix = f"blk.{i}."
        block = {n[len(prefix) :]: v for n, v in t.items() if n.startswith(prefix)}
        x = _block(x, block, meta)
    x = _rms_norm(x, t["output_norm.weight"], meta[f"{arch}.attention.layer_norm_rms_epsilon"])
    return x @ t.get("output.weight", t["token_embd.weight"]).T
