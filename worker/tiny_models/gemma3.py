"""A tiny random-weight Gemma 3 (image-text-to-text) checkpoint in its published layout.

"gemma3" (like google/gemma-3-4b-it): nested `text_config` / `vision_config` (SigLIP), tensors
`language_model.model.*` / `vision_tower.vision_model.*` / `multi_modal_projector.*`, a
SentencePiece-style BPE (byte fallback, "▁" for spaces) with <start_of_image> /
<image_soft_token>, the Gemma 3 template, a Gemma3ImageProcessor config and the
processor_config.json carrying `image_seq_length`; in the format `mlx_vlm.load` reads.

Weights follow `worker.tiny_models.build`'s recipe (N(0, 1/fan_in), tied embeddings whose rows
of special tokens are zero, so generation practically never ends on its own).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from worker.tiny_models.tokenizer import (
    TokenizerSpec,
    id_of,
    stdlib_corpus,
    write_json,
    write_tokenizer_files,
)
from worker.tiny_models.vlm import (
    Specs,
    VlmDims,
    linear,
    materialize,
    norm,
    text_weights,
)

# --- Gemma 3 --------------------------------------------------------------------------------

GEMMA3_IMAGE_SIZE = 64
GEMMA3_PATCH = 8
GEMMA3_TOKENS_PER_IMAGE = 16  # the 8 x 8 patch grid average-pooled to 4 x 4
GEMMA3_SLIDING_WINDOW = 512
GEMMA3_BRANCH_GAIN = 16.0  # scale of the normalized attention / MLP outputs, see below

# The Gemma 3 instruction template as published: <bos> from the template, "model" turns,
# the system prompt folded into the first user turn, images as <start_of_image> (the
# processor expands it to the image's soft tokens).
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate '
    'user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)

# Gemma's special tokens at the start of the vocabulary, then 256 byte-fallback pieces, then
# the learned pieces; the image tokens come last (as in the real vocabulary's id order).
_GEMMA3_HEAD = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>")
_GEMMA3_IMAGE_TOKENS = ("<start_of_image>", "<end_of_image>", "<image_soft_token>")
_BYTE_PIECES = tuple(f"<0x{b:02X}>" for b in range(256))

GEMMA3_TOKENIZER = TokenizerSpec(
    pretokenize_regex="",  # unused: SentencePiece-style, see _train_gemma3_tokenizer
    nfc=False,
    added_tokens=tuple((t, True) for t in _GEMMA3_HEAD + _GEMMA3_IMAGE_TOKENS),
    bos_token="<bos>",
    eos_token="<eos>",
    pad_token="<pad>",
    additional_special_tokens=(),
    chat_template=GEMMA3_CHAT_TEMPLATE,
    tokenizer_class="GemmaTokenizer",
    post_processor_adds_bos=True,
    extra_config={
        "add_bos_token": True,
        "add_eos_token": False,
        "boi_token": "<start_of_image>",
        "clean_up_tokenization_spaces": False,
        "eoi_token": "<end_of_image>",
        "extra_special_tokens": {
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
        "image_token": "<image_soft_token>",
        "mask_token": "<mask>",
        "processor_class": "Gemma3Processor",
        "spaces_between_special_tokens": False,
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    },
)


def _train_gemma3_tokenizer(vocab_size: int) -> Tokenizer:
    """A SentencePiece-style BPE like Gemma's: spaces as "▁", byte fallback, <bos> added."""
    n_learned = vocab_size - len(_GEMMA3_IMAGE_TOKENS)
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    # Words start with "▁" during training, so no learned piece spans two words.
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    trainer = trainers.BpeTrainer(
        vocab_size=n_learned,
        min_frequency=2,
        show_progress=False,
        special_tokens=list(_GEMMA3_HEAD + _BYTE_PIECES),
    )
    corpus_bytes = max(1 << 20, 256 * vocab_size)
    trainer_tok.train_from_iterator(_lines(stdlib_corpus(corpus_bytes)), trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    vocab: dict[str, int] = trained["vocab"]
    if len(vocab) != n_learned:
        raise RuntimeError(f"BPE training reached {len(vocab)} tokens, wanted {n_learned}")
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    # Rebuilt so that only the real special tokens are added tokens (the byte pieces are
    # ordinary vocabulary entries, as in Gemma's tokenizer.json).
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    )
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in _GEMMA3_HEAD + _GEMMA3_IMAGE_TOKENS]
    )
    bos_id = tok.token_to_id("<bos>")
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", bos_id)]
    )
    if tok.get_vocab_size() != vocab_size:
        raise RuntimeError(f"Gemma tokenizer has {tok.get_vocab_size()} ids, wanted {vocab_size}")
    return tok


def _lines(texts: Iterator[str]) -> Iterator[str]:
    for text in texts:
        yield from text.splitlines(keepends=True)


def gemma3_config(d: VlmDims, tid: Any) -> dict[str, Any]:
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "boi_token_index": tid("<start_of_image>"),
        "eoi_token_index": tid("<end_of_image>"),
        "eos_token_id": [tid("<eos>"), tid("<end_of_turn>")],
        "image_token_index": tid("<image_soft_token>"),
        "initializer_range": 0.02,
        "mm_tokens_per_image": GEMMA3_TOKENS_PER_IMAGE,
        "model_type": "gemma3",
        "text_config": {
            "head_dim": d.head_dim,
            "hidden_size": d.hidden,
            "intermediate_size": d.intermediate,
            "max_position_embeddings": d.max_positions,
            # mlx-vlm reads the image's token count here (its default is the real 256).
            "mm_tokens_per_image": GEMMA3_TOKENS_PER_IMAGE,
            "model_type": "gemma3_text",
            "num_attention_heads": d.heads,
            "num_hidden_layers": d.layers,
            "num_key_value_heads": d.kv_heads,
            "query_pre_attn_scalar": d.head_dim,
            "rms_norm_eps": 1e-06,
            "rope_local_base_freq": 10000.0,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "rope_theta": 1000000.0,
            "sliding_window": GEMMA3_SLIDING_WINDOW,
            # Every second layer global (the real 5:1 pattern needs six layers).
            "sliding_window_pattern": 2,
            "vocab_size": d.vocab,
        },
        "torch_dtype": "float32",
        "vision_config": {
            "hidden_size": d.vision_dim,
            "image_size": GEMMA3_IMAGE_SIZE,
            "intermediate_size": d.vision_dim * d.vision_mlp_ratio,
            "model_type": "siglip_vision_model",
            "num_attention_heads": d.vision_heads,
            "num_hidden_layers": d.vision_depth,
            "patch_size": GEMMA3_PATCH,
            "vision_use_head": False,
        },
    }


def gemma3_generation_config(tid: Any) -> dict[str, Any]:
    # gemma-3-it's published defaults.
    return {
        "bos_token_id": tid("<bos>"),
        "cache_implementation": "hybrid",
        "do_sample": True,
        "eos_token_id": [tid("<eos>"), tid("<end_of_turn>")],
        "pad_token_id": tid("<pad>"),
        "top_k": 64,
        "top_p": 0.95,
    }


GEMMA3_PREPROCESSOR_CONFIG: dict[str, Any] = {
    "do_convert_rgb": None,
    "do_normalize": True,
    "do_pan_and_scan": None,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Gemma3ImageProcessor",
    "image_seq_length": GEMMA3_TOKENS_PER_IMAGE,
    "image_std": [0.5, 0.5, 0.5],
    "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None,
    "pan_and_scan_min_ratio_to_activate": None,
    "processor_class": "Gemma3Processor",
    "resample": 2,
    "rescale_factor": 1 / 255,
    "size": {"height": GEMMA3_IMAGE_SIZE, "width": GEMMA3_IMAGE_SIZE},
}


def _gemma3_text_weights(d: VlmDims, zero_rows: list[int]) -> dict[str, np.ndarray]:
    weights = text_weights(d, zero_rows, qk_norm=True, prefix="language_model.model.")
    for name, value in weights.items():
        if name.endswith("norm.weight"):
            value[:] = 0.0  # Gemma's RMSNorm scales by 1 + weight
    for i in range(d.layers):
        p = f"language_model.model.layers.{i}."
        weights[f"{p}pre_feedforward_layernorm.weight"] = np.zeros(d.hidden, np.float32)
        # Gemma normalizes each branch before adding it to the residual stream; a gain keeps
        # the stream from being dominated by the current token's own (tied) embedding,
        # which makes greedy decoding repeat one token (the RESIDUAL_GAIN of the decoders).
        for branch_norm in ("post_attention_layernorm", "post_feedforward_layernorm"):
            gain = np.full(d.hidden, GEMMA3_BRANCH_GAIN - 1.0, np.float32)
            weights[f"{p}{branch_norm}.weight"] = gain
    return weights


def _gemma3_vision_specs(d: VlmDims) -> Specs:
    dim, mlp, v = d.vision_dim, d.vision_dim * d.vision_mlp_ratio, "vision_tower.vision_model."
    patch, positions = GEMMA3_PATCH, (GEMMA3_IMAGE_SIZE // GEMMA3_PATCH) ** 2
    specs: Specs = {
        # PyTorch Conv2d layout: out, in, height, width.
        v + "embeddings.patch_embedding.weight": ((dim, 3, patch, patch), (3 * patch**2) ** -0.5),
        v + "embeddings.patch_embedding.bias": ((dim,), "zeros"),
        v + "embeddings.position_embedding.weight": ((positions, dim), 0.02),
        v + "post_layernorm.weight": ((dim,), "ones"),
        v + "post_layernorm.bias": ((dim,), "zeros"),
        "multi_modal_projector.mm_soft_emb_norm.weight": ((dim,), "zeros"),
        "multi_modal_projector.mm_input_projection_weight": ((dim, d.hidden), dim**-0.5),
    }
    for i in range(d.vision_depth):
        p = f"{v}encoder.layers.{i}."
        specs |= norm(p + "layer_norm1", dim) | norm(p + "layer_norm2", dim)
        specs |= linear(p + "mlp.fc1", mlp, dim) | linear(p + "mlp.fc2", dim, mlp)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            specs |= linear(f"{p}self_attn.{proj}", dim, dim)
    return specs


def build_gemma3(arch: object, dims: VlmDims, out_dir: Path) -> int:
    """Writes a tiny Gemma 3 (image-text-to-text) into `out_dir`; returns its parameters."""
    spec = GEMMA3_TOKENIZER
    tok = _train_gemma3_tokenizer(dims.vocab)
    tid = id_of(tok)
    write_tokenizer_files(spec, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", gemma3_config(dims, tid))
    write_json(out_dir / "generation_config.json", gemma3_generation_config(tid))
    write_json(out_dir / "preprocessor_config.json", GEMMA3_PREPROCESSOR_CONFIG)
    processor = {"image_seq_length": GEMMA3_TOKENS_PER_IMAGE, "processor_class": "Gemma3Processor"}
    write_json(out_dir / "processor_config.json", processor)
    special = [tid(t) for t, _ in spec.added_tokens]
    tensors = {**_gemma3_text_weights(dims, special), **materialize(_gemma3_vision_specs(dims))}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
