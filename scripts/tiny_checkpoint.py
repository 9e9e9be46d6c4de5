"""Tiny random-weight checkpoints in the real Hugging Face on-disk format, built offline.

Tests and demos cannot download weights, so this module builds checkpoint directories that the
real loaders (`mlx_lm.load`) read through their ordinary path: `config.json` with the real
`model_type` and fields, `model.safetensors` with the tensor names real checkpoints use,
a trained byte-level BPE tokenizer with its chat template (see `scripts.tiny_tokenizer`) and
`generation_config.json`.

Weights are random but deterministic (fixed seed per tensor name). The output-embedding rows of
every added token (EOS, chat markers, <think>, ...) are zero, so their logit is exactly 0 while
ordinary tokens' logits spread with a standard deviation of about `LOGIT_STD`: a random model
then practically never ends or opens a think block on its own, which makes generation lengths
deterministic (a client can still force EOS through a logit bias).

Usage: `ensure_checkpoint("qwen3")` -> Path, or
`python -m scripts.tiny_checkpoint --arch llama --size 20m` (prints the path last on stdout).
Speech and vision architectures ("whisper", "qwen3_tts", "soprano", "qwen2_vl",
"qwen3_omni_moe") have their own builders (scripts/tiny_whisper.py, tiny_tts.py, tiny_vlm.py,
tiny_omni.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from scripts import (
    tiny_gemma3,
    tiny_kokoro,
    tiny_omni,
    tiny_tts,
    tiny_tts_families,
    tiny_vlm,
    tiny_vlm_families,
    tiny_whisper,
)
from scripts.tiny_tokenizer import (
    LLAMA3,
    QWEN2,
    TokenizerSpec,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

# Bump when the output of any builder changes, so stale caches are not reused.
BUILDER_VERSION = 2
SEED = 0
# Standard deviation of ordinary tokens' logits: large enough that a zeroed (logit 0) special
# token is sampled with negligible probability even at temperature 1 (measured: ~1e-7 a step).
LOGIT_STD = 4.0
# Extra scale of the projections that write into the residual stream (o_proj, down_proj), so it
# is dominated by what attention gathered from the prompt rather than by the current token's own
# embedding: with tied embeddings that term makes greedy decoding repeat one token forever.
RESIDUAL_GAIN = 4.0
DEFAULT_CACHE_DIR = Path("~/.cache/vllm-omni-mlx/checkpoints")

log = logging.getLogger(__name__)

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


SIZES: Mapping[str, Dims] = {
    # ~0.8M params (qwen3): loads and generates in milliseconds.
    "tiny": Dims(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, vocab=4096),
    # ~20M params (qwen3), float32: a benchmark model whose decode is compute-bound on a CPU.
    "20m": Dims(hidden=384, layers=8, heads=6, kv_heads=2, intermediate=1536, vocab=8192),
}


def _qwen3_config(d: Dims, tid: TokenId) -> dict[str, Any]:
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


def _qwen3_generation_config(tid: TokenId) -> dict[str, Any]:
    # Qwen3's published sampling defaults (thinking mode).
    return qwen_generation_config(tid, temperature=0.6, top_p=0.95, top_k=20)


def _llama_config(d: Dims, tid: TokenId) -> dict[str, Any]:
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


def _llama_generation_config(tid: TokenId) -> dict[str, Any]:
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
    output_name = "model.embed_tokens.weight"
    if not config["tie_word_embeddings"]:
        output_name = "lm_head.weight"
        specs[output_name] = ((vocab, hidden), embed_std)

    weights = {name: _random_tensor(name, shape, std) for name, (shape, std) in specs.items()}
    weights[output_name][zero_rows] = 0.0
    return weights


def _random_tensor(name: str, shape: tuple[int, ...], std: float | None) -> np.ndarray:
    if std is None:
        return np.ones(shape, dtype=np.float32)
    # Seeded by name, so a tensor's values do not depend on which other tensors exist.
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def build_text_decoder(arch: Arch, dims: Dims, out_dir: Path) -> int:
    """Write a decoder-only text checkpoint for `arch` into `out_dir`; return its parameters."""
    tok = train_tokenizer(arch.tokenizer, dims.vocab)
    tid = tok.token_to_id
    config = arch.config(dims, tid)
    added_ids = [tid(content) for content, _ in arch.tokenizer.added_tokens]
    write_tokenizer_files(arch.tokenizer, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", arch.generation_config(tid))
    weights = decoder_weights(config, zero_rows=added_ids)
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())


@dataclass(frozen=True)
class Arch:
    """How to build one architecture. Vision or audio models plug in their own `build`."""

    tokenizer: TokenizerSpec
    config: Callable[[Dims, TokenId], dict[str, Any]]
    generation_config: Callable[[TokenId], dict[str, Any]]
    sizes: Mapping[str, Dims] = field(default_factory=lambda: SIZES)
    # Writes every file into a given directory and returns the number of parameters.
    build: Callable[[Arch, Dims, Path], int] = build_text_decoder


ARCHS: Mapping[str, Arch] = {
    "qwen3": Arch(QWEN2, _qwen3_config, _qwen3_generation_config),
    "llama": Arch(LLAMA3, _llama_config, _llama_generation_config),
    # Speech in, for mlx_audio.stt.load: its own build writes every file (scripts/tiny_whisper.py).
    "whisper": Arch(
        tiny_whisper.TOKENIZER,
        tiny_whisper.config,
        tiny_whisper.generation_config,
        sizes=tiny_whisper.SIZES,
        build=tiny_whisper.build,
    ),
    # Speech out, for mlx_audio.tts.load_model: their own builds write every file
    # (scripts/tiny_tts.py).
    "qwen3_tts": Arch(
        tiny_tts.QWEN3_TTS_TOKENIZER,
        tiny_tts.qwen3_tts_config,
        tiny_tts.qwen3_tts_generation_config,
        sizes=tiny_tts.QWEN3_TTS_SIZES,
        build=tiny_tts.build_qwen3_tts,
    ),
    # Images in, for mlx_vlm.load: its own build writes every file (scripts/tiny_vlm.py).
    "qwen2_vl": Arch(
        tiny_vlm.TOKENIZER,
        tiny_vlm.config,
        tiny_vlm.generation_config,
        sizes=tiny_vlm.SIZES,
        build=tiny_vlm.build,
    ),
    "soprano": Arch(
        tiny_tts.SOPRANO_TOKENIZER,
        tiny_tts.soprano_config,
        tiny_tts.soprano_generation_config,
        sizes=tiny_tts.SOPRANO_SIZES,
        build=tiny_tts.build_soprano,
    ),
    # Qwen3-TTS Base: voice cloning (speaker encoder + the codec's encoder).
    "qwen3_tts_base": Arch(
        tiny_tts.QWEN3_TTS_TOKENIZER,
        tiny_tts.qwen3_tts_base_config,
        tiny_tts.qwen3_tts_generation_config,
        sizes=tiny_tts.QWEN3_TTS_SIZES,
        build=tiny_tts.build_qwen3_tts_base,
    ),
    # Audio (and images) in, text out, for mlx_vlm.load: a Qwen3-Omni thinker; its own build
    # writes every file (scripts/tiny_omni.py).
    "qwen3_omni_moe": Arch(
        tiny_omni.TOKENIZER,
        tiny_omni.config,
        tiny_omni.generation_config,
        sizes=tiny_omni.SIZES,
        build=tiny_omni.build,
    ),
    # More speech-out families (scripts/tiny_tts_families.py).
    "voxcpm2": Arch(
        tiny_tts_families.VOXCPM2_TOKENIZER,
        tiny_tts_families.voxcpm2_config,
        tiny_tts_families.voxcpm2_generation_config,
        sizes=tiny_tts_families.VOXCPM2_SIZES,
        build=tiny_tts_families.build_voxcpm2,
    ),
    "moss_tts_nano": Arch(
        tiny_tts_families.VOXCPM2_TOKENIZER,  # unused: the build writes a SentencePiece model
        tiny_tts_families.moss_tts_nano_config,
        tiny_tts_families.moss_tts_nano_generation_config,
        sizes=tiny_tts_families.MOSS_TTS_NANO_SIZES,
        build=tiny_tts_families.build_moss_tts_nano,
    ),
    "kokoro": Arch(
        tiny_tts_families.VOXCPM2_TOKENIZER,  # unused: Kokoro reads phonemes (config vocab)
        tiny_kokoro.kokoro_config,
        tiny_kokoro.kokoro_generation_config,
        sizes=tiny_kokoro.KOKORO_SIZES,
        build=tiny_kokoro.build_kokoro,
    ),
    # More image-in families for mlx_vlm.load (scripts/tiny_vlm_families.py, tiny_gemma3.py).
    "qwen2_5_vl": Arch(
        tiny_vlm_families.QWEN2_5_VL_TOKENIZER,
        tiny_vlm_families.qwen2_5_vl_config,
        tiny_vlm_families.qwen2_5_vl_generation_config,
        sizes=tiny_vlm_families.SIZES,
        build=tiny_vlm_families.build_qwen2_5_vl,
    ),
    "qwen3_vl": Arch(
        tiny_vlm_families.QWEN3_VL_TOKENIZER,
        tiny_vlm_families.qwen3_vl_config,
        tiny_vlm_families.qwen3_vl_generation_config,
        sizes=tiny_vlm_families.SIZES,
        build=tiny_vlm_families.build_qwen3_vl,
    ),
    "gemma3": Arch(
        tiny_gemma3.GEMMA3_TOKENIZER,
        tiny_gemma3.gemma3_config,
        tiny_gemma3.gemma3_generation_config,
        sizes=tiny_vlm_families.SIZES,
        build=tiny_gemma3.build_gemma3,
    ),
}


def _lookup(arch: str, size: str) -> tuple[Arch, Dims]:
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose from: {', '.join(sorted(ARCHS))}")
    spec = ARCHS[arch]
    if size not in spec.sizes:
        choices = ", ".join(sorted(spec.sizes))
        raise ValueError(f"unknown size {size!r} for {arch}; choose from: {choices}")
    return spec, spec.sizes[size]


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The checkpoints directory: `cache_dir`, else $VOMLX_CACHE_DIR, else the user cache."""
    chosen = cache_dir or os.environ.get("VOMLX_CACHE_DIR") or DEFAULT_CACHE_DIR
    return Path(chosen).expanduser()


def checkpoint_name(arch: str, size: str) -> str:
    return f"{arch}-{size}-v{BUILDER_VERSION}"


def ensure_checkpoint(
    arch: str = "qwen3",
    size: str = "tiny",
    cache_dir: str | Path | None = None,
    force: bool = False,
) -> Path:
    """Return the directory of the `arch`/`size` checkpoint, building it on first use.

    Safe when several processes ask at once: each builds into its own temporary directory
    next to the target and renames it into place; a loser discards its copy. The target
    therefore either does not exist or is complete.
    """
    spec, dims = _lookup(arch, size)
    root = cache_root(cache_dir)
    target = root / checkpoint_name(arch, size)
    if target.is_dir() and not force:
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=root))
    try:
        started = time.perf_counter()
        n_params = spec.build(spec, dims, tmp)
        _make_readable(tmp)
        if force and target.exists():
            _discard(target)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            log.info("%s: built concurrently by another process, keeping theirs", target.name)
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            elapsed = time.perf_counter() - started
            log.info("%s: %.2fM parameters, built in %.2f s", target.name, n_params / 1e6, elapsed)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _make_readable(directory: Path) -> None:
    # mkdtemp (and safetensors) create private files; the cache is as shared as any other.
    directory.chmod(0o755)
    for path in directory.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def _discard(path: Path) -> None:
    # Rename first so that no reader sees a half-deleted checkpoint under the real name.
    trash = path.with_name(f".{path.name}.{uuid.uuid4().hex}.old")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.tiny_checkpoint",
        description="Build (once) a tiny random-weight checkpoint and print its directory.",
    )
    parser.add_argument("--arch", default="qwen3", choices=sorted(ARCHS))
    all_sizes = sorted({s for a in ARCHS.values() for s in a.sizes})
    parser.add_argument("--size", default="tiny", choices=all_sizes)
    parser.add_argument("--cache-dir", default=None, help="default: $VOMLX_CACHE_DIR or ~/.cache")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        path = ensure_checkpoint(args.arch, args.size, args.cache_dir, args.force)
    except ValueError as exc:
        parser.error(str(exc))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
