"""GGUF file -> mlx-lm checkpoint directory (config.json, model.safetensors, tokenizer files).

The output is what `mlx_lm.load` reads: the Hugging Face layout of the architecture, with the
weights dequantized (float32 by default: exact for every GGUF block format, and the fast
matmul path of MLX on a Linux CPU), the tokenizer rebuilt from the metadata and the chat
template in tokenizer_config.json.
"""

from __future__ import annotations

from pathlib import Path

from worker.convert.errors import ConversionError
from worker.convert.gguf_config import (
    architecture,
    generation_config,
    hyperparameters,
    model_config,
)
from worker.convert.gguf_tensors import GgufFile, planned_tensors, type_counts
from worker.convert.gguf_tokenizer import (
    build_tokenizer,
    read_vocabulary,
    special_tokens_map,
    tokenizer_config,
)
from worker.convert.output import Summary, write_json, write_safetensors

DEFAULT_DTYPE = "float32"


def convert_gguf(src: Path, out: Path, dtype: str | None = None) -> Summary:
    """Convert the GGUF file `src` into the (existing, empty) directory `out`."""
    dtype = dtype or DEFAULT_DTYPE
    source = GgufFile(src)
    arch = architecture(source)
    params = hyperparameters(source, arch)
    vocab = read_vocabulary(source)
    embed_rows = source.tensors["token_embd.weight"].shape[0]
    if embed_rows < len(vocab.tokens):
        raise ConversionError(f"{len(vocab.tokens)} tokens but {embed_rows} embedding rows")
    tokenizer = build_tokenizer(vocab)

    tensors = planned_tensors(source, params.n_head, params.n_head_kv, arch.permuted_qk)
    metadata = {"format": "pt", "converted_from": "gguf"}
    n_params = write_safetensors(out / "model.safetensors", tensors, dtype, metadata)
    write_json(out / "config.json", model_config(source, arch, params, dtype))
    tokenizer.save(str(out / "tokenizer.json"))
    write_json(out / "tokenizer_config.json", tokenizer_config(vocab, params.context))
    write_json(out / "special_tokens_map.json", special_tokens_map(vocab))
    generation = generation_config(source)
    if generation is not None:
        write_json(out / "generation_config.json", generation)

    types = ", ".join(f"{count} {name}" for name, count in type_counts(source).items())
    details = [
        f"architecture {arch.gguf_name} -> {arch.model_type}, {params.n_layer} layers, "
        f"{params.n_head} heads / {params.n_head_kv} KV heads, hidden {params.hidden}",
        f"tensors: {types}" + ("; q/k rows un-permuted" if arch.permuted_qk else ""),
        f"tokenizer: {len(vocab.tokens)} tokens, {len(vocab.merges)} merges, "
        f"pre-tokenizer {vocab.pre!r}, chat template {'yes' if vocab.chat_template else 'no'}",
    ]
    return Summary("gguf", out, n_params, dtype, details)
