"""Llama checkpoints at real sizes, random bfloat16 weights made on MLX's default device (a
GPU makes an 8B one in seconds): for speed only (scripts/gpu_bench.sh), never for tests.

    python -m worker.tiny_models.real_size 1b|3b|8b    # prints the directory

Shapes of Llama 3.2 1B and 3B (tied embeddings) and Llama 3.1 8B (untied), with their
128,256-row vocabulary, so the bytes a decoded token reads are the real model's. The
tokenizer, chat template and generation config are the tiny llama's (its BPE has fewer
entries than the embedding has rows, as padded vocabularies do). Cached like the tiny ones:
<$VOMLX_CACHE_DIR>/llama-real-<size>-v<BUILDER_VERSION>.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

from worker.tiny_models.build import BUILDER_VERSION, cache_root, ensure_checkpoint
from worker.tiny_models.text import RESIDUAL_GAIN, Dims, llama_config
from worker.tiny_models.tokenizer import id_of

VOCAB = 128256
SHAPES = {
    "1b": (Dims(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=VOCAB,
                max_positions=131072), True),
    "3b": (Dims(hidden=3072, layers=28, heads=24, kv_heads=8, intermediate=8192, vocab=VOCAB,
                max_positions=131072), True),
    "8b": (Dims(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=VOCAB,
                max_positions=131072), False),
}  # fmt: skip
SHARD_BYTES = 4 << 30
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                    "generation_config.json")  # fmt: skip


def parameters(dims: Dims, tied: bool) -> int:
    h, kv = dims.hidden, dims.kv_heads * dims.head_dim
    layer = 2 * h * h + 2 * h * kv + 3 * h * dims.intermediate + 2 * h
    return dims.layers * layer + dims.vocab * h * (1 if tied else 2) + h


def _shapes(dims: Dims, tied: bool) -> dict[str, tuple[tuple[int, ...], float | None]]:
    h, inter, kv = dims.hidden, dims.intermediate, dims.kv_heads * dims.head_dim
    shapes: dict[str, tuple[tuple[int, ...], float | None]] = {
        "model.embed_tokens.weight": ((dims.vocab, h), h**-0.5),
        "model.norm.weight": ((h,), None),
    }
    for i in range(dims.layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": ((h,), None),
            p + "post_attention_layernorm.weight": ((h,), None),
            p + "self_attn.q_proj.weight": ((h, h), h**-0.5),
            p + "self_attn.k_proj.weight": ((kv, h), h**-0.5),
            p + "self_attn.v_proj.weight": ((kv, h), h**-0.5),
            p + "self_attn.o_proj.weight": ((h, h), RESIDUAL_GAIN * h**-0.5),
            p + "mlp.gate_proj.weight": ((inter, h), h**-0.5),
            p + "mlp.up_proj.weight": ((inter, h), h**-0.5),
            p + "mlp.down_proj.weight": ((h, inter), RESIDUAL_GAIN * inter**-0.5),
        }
    if not tied:
        shapes["lm_head.weight"] = ((dims.vocab, h), h**-0.5)
    return shapes


def build(size: str, out_dir: Path) -> None:
    import mlx.core as mx
    from tokenizers import Tokenizer

    dims, tied = SHAPES[size]
    tiny = ensure_checkpoint("llama", "tiny")
    for name in _TOKENIZER_FILES:
        if (tiny / name).exists():
            shutil.copy(tiny / name, out_dir / name)
    tok = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    config = llama_config(dims, id_of(tok)) | {"tie_word_embeddings": tied,
                                                     "torch_dtype": "bfloat16"}  # fmt: skip
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    shard: dict = {}
    shard_bytes, index, files = 0, {}, list[str]()
    mx.random.seed(0)

    def flush() -> None:
        nonlocal shard, shard_bytes
        name = f"model-{len(files) + 1:05d}.safetensors"
        mx.save_safetensors(str(out_dir / name), shard, metadata={"format": "mlx"})
        index.update(dict.fromkeys(shard, name))
        files.append(name)
        shard, shard_bytes = {}, 0

    for name, (shape, std) in _shapes(dims, tied).items():
        if std is None:
            value = mx.ones(shape, dtype=mx.bfloat16)
        else:
            value = (mx.random.normal(shape) * std).astype(mx.bfloat16)
        mx.eval(value)
        shard[name] = value
        shard_bytes += math.prod(shape) * 2
        if shard_bytes >= SHARD_BYTES:
            flush()
    if shard:
        flush()
    total = sum(math.prod(s) * 2 for s, _ in _shapes(dims, tied).values())
    (out_dir / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": index}, indent=1)
    )


def ensure(size: str) -> Path:
    target = cache_root() / f"llama-real-{size}-v{BUILDER_VERSION}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(size, tmp)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


if __name__ == "__main__":
    print(ensure(sys.argv[1]))
