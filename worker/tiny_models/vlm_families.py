"""Tiny random-weight Qwen2.5-VL and Qwen3-VL checkpoints in their published layouts.

Each builder writes what the real checkpoint ships, with small dimensions, in the format
`mlx_vlm.load` reads (its `sanitize` methods map the tensor names):

- "qwen2_5_vl" (like Qwen/Qwen2.5-VL-3B-Instruct): a flat config.json with `vision_config`
  (RMSNorm + SwiGLU vision blocks, windowed attention with `fullatt_block_indexes`), tensors
  `model.*` / `visual.*`, Qwen2-VL's tokens and template, a Qwen2VLImageProcessor config.
- "qwen3_vl" (like Qwen/Qwen3-VL-2B-Instruct): nested `text_config` / `vision_config`
  (interleaved mRoPE, deepstack mergers, learned position grid), tensors
  `model.language_model.*` / `model.visual.*`, Qwen3's tokens and the Qwen3-VL template,
  `size.shortest_edge` / `longest_edge` pixel bounds.
(Gemma 3 is in worker/tiny_models/gemma3.py.)

Weights follow `worker.tiny_models.text`'s recipe (N(0, 1/fan_in), tied embeddings whose rows
of special tokens are zero, so generation practically never ends on its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.numpy import save_file

from worker.tiny_models.text import qwen_generation_config
from worker.tiny_models.tokenizer import (
    id_of,
    qwen_tokenizer,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)
from worker.tiny_models.vlm import (
    PREPROCESSOR_CONFIG,
    QWEN2_VL_CHAT_TEMPLATE,
    QWEN2_VL_PATCHING,
    QWEN2_VL_TOKENS,
    Specs,
    VlmDims,
    linear,
    materialize,
    mrope_section,
    norm,
    qwen2_text_weights,
    qwen2_vl_shared_config,
    qwen_vision_block,
    qwen_vision_weights,
    text_weights,
    vision_token_ids,
)
from worker.tiny_models.vlm import SIZES as QWEN2_VL_SIZES

# One size per family (~1-2M parameters), the shape of the tiny Qwen2-VL: loads and answers
# about a small image at once.
SIZES: Mapping[str, VlmDims] = {"tiny": QWEN2_VL_SIZES["tiny"]}


# --- Qwen2.5-VL and Qwen3-VL: Qwen2-VL's tokens and processor, their own towers -------------

# Qwen2.5-VL's and Qwen3-VL's added tokens in id order: (content, special); Qwen2-VL's, then
# tool and fill-in-the-middle tokens (not special).
QWEN2_5_VL_TOKENS: tuple[tuple[str, bool], ...] = (
    *QWEN2_VL_TOKENS,
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
QWEN3_VL_TOKENS: tuple[tuple[str, bool], ...] = (
    *QWEN2_5_VL_TOKENS,
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# The Qwen3-VL-Instruct template as published: tools in the system turn, content parts in
# order with images as vision markers around one pad token, tool results in a user turn.
QWEN3_VL_CHAT_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {%- if messages[0].content is string %}
            {{- messages[0].content }}
        {%- else %}
            {%- for content in messages[0].content %}
                {%- if 'text' in content %}
                    {{- content.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' }}
        {%- if messages[0].content is string %}
            {{- messages[0].content }}
        {%- else %}
            {%- for content in messages[0].content %}
                {%- if 'text' in content %}
                    {{- content.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set image_count = namespace(value=0) %}
{%- set video_count = namespace(value=0) %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' }}
        {%- if message.content is string %}
            {{- message.content }}
        {%- else %}
            {%- for content in message.content %}
                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}
                    {%- set image_count.value = image_count.value + 1 %}
                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}
                    <|vision_start|><|image_pad|><|vision_end|>
                {%- elif content.type == 'video' or 'video' in content %}
                    {%- set video_count.value = video_count.value + 1 %}
                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}
                    <|vision_start|><|video_pad|><|vision_end|>
                {%- elif 'text' in content %}
                    {{- content.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role + '\n' }}
        {%- if message.content is string %}
            {{- message.content }}
        {%- else %}
            {%- for content_item in message.content %}
                {%- if 'text' in content_item %}
                    {{- content_item.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and message.content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {%- if message.content is string %}
            {{- message.content }}
        {%- else %}
            {%- for content in message.content %}
                {%- if 'text' in content %}
                    {{- content.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""


QWEN2_5_VL_TOKENIZER = qwen_tokenizer(QWEN2_5_VL_TOKENS, QWEN2_VL_CHAT_TEMPLATE)
QWEN3_VL_TOKENIZER = qwen_tokenizer(QWEN3_VL_TOKENS, QWEN3_VL_CHAT_TEMPLATE)


def qwen2_5_vl_config(d: VlmDims, tid: Any) -> dict[str, Any]:
    return {
        **qwen2_vl_shared_config(d, tid),
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "rope_scaling": {"mrope_section": mrope_section(d.head_dim // 2), "type": "mrope"},
        "vision_config": {
            "depth": d.vision_depth,
            # The last block of each group attends globally, the others within windows.
            "fullatt_block_indexes": [d.vision_depth - 1],
            "hidden_act": "silu",
            "hidden_size": d.vision_dim,
            "intermediate_size": d.vision_dim * d.vision_mlp_ratio,
            "num_heads": d.vision_heads,
            "out_hidden_size": d.hidden,
            "tokens_per_second": 2,
            "window_size": 112,
            **QWEN2_VL_PATCHING,
        },
    }


def qwen2_5_vl_generation_config(tid: Any) -> dict[str, Any]:
    # Qwen2.5-VL-Instruct's published defaults, without its repetition_penalty of 1.05: the
    # server applies a checkpoint's penalty while mlx-vlm's generate ignores it, and the
    # equivalence tests compare the two.

    return qwen_generation_config(tid, temperature=0.1, top_p=0.001, top_k=1)


def build_qwen2_5_vl(arch: object, dims: VlmDims, out_dir: Path) -> int:
    """Writes a tiny Qwen2.5-VL into `out_dir`; returns its parameters (`Arch.build`)."""
    spec = QWEN2_5_VL_TOKENIZER
    tok = train_tokenizer(spec, dims.vocab)
    tid = id_of(tok)
    write_tokenizer_files(spec, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", qwen2_5_vl_config(dims, tid))
    write_json(out_dir / "generation_config.json", qwen2_5_vl_generation_config(tid))
    preprocessor = {**PREPROCESSOR_CONFIG, "processor_class": "Qwen2_5_VLProcessor"}
    write_json(out_dir / "preprocessor_config.json", preprocessor)
    special = [tid(t) for t, _ in spec.added_tokens]
    tensors = {**qwen2_text_weights(dims, special), **qwen_vision_weights(dims, "qwen2_5_vl")}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())


QWEN3_VL_PATCH = 16
QWEN3_VL_POSITION_GRID = 8  # learned positions on an 8 x 8 grid, interpolated per image
# Pixel bounds (Qwen3-VL's `size`): images become multiples of 32 px, at most 64 tokens.
QWEN3_VL_SIZE = {"longest_edge": 256 * 256, "shortest_edge": 64 * 64}


def qwen3_vl_config(d: VlmDims, tid: Any) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "text_config": {
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": tid("<|endoftext|>"),
            "dtype": "float32",
            "eos_token_id": tid("<|im_end|>"),
            "head_dim": d.head_dim,
            "hidden_act": "silu",
            "hidden_size": d.hidden,
            "initializer_range": 0.02,
            "intermediate_size": d.intermediate,
            "max_position_embeddings": d.max_positions,
            "model_type": "qwen3_vl_text",
            "num_attention_heads": d.heads,
            "num_hidden_layers": d.layers,
            "num_key_value_heads": d.kv_heads,
            "rms_norm_eps": 1e-06,
            "rope_scaling": {
                "mrope_interleaved": True,
                "mrope_section": mrope_section(d.head_dim // 2),
                "rope_type": "default",
            },
            "rope_theta": 5000000,
            "tie_word_embeddings": True,
            "use_cache": True,
            "vocab_size": d.vocab,
        },
        "tie_word_embeddings": True,
        "vision_config": {
            # Features of these blocks are merged and added to the first LLM layers.
            "deepstack_visual_indexes": list(range(d.vision_depth)),
            "depth": d.vision_depth,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": d.vision_dim,
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": d.vision_dim * d.vision_mlp_ratio,
            "model_type": "qwen3_vl",
            "num_heads": d.vision_heads,
            "num_position_embeddings": QWEN3_VL_POSITION_GRID**2,
            "out_hidden_size": d.hidden,
            "patch_size": QWEN3_VL_PATCH,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        **vision_token_ids(tid),
    }


def qwen3_vl_generation_config(tid: Any) -> dict[str, Any]:
    # Qwen3-VL-Instruct's published defaults.

    return qwen_generation_config(tid, temperature=0.7, top_p=0.8, top_k=20)


def _merger_specs(prefix: str, dim: int, out: int, norm_dim: int) -> Specs:
    merged = dim * 4
    return (
        norm(prefix + "norm", norm_dim)
        | linear(prefix + "linear_fc1", merged, merged)
        | linear(prefix + "linear_fc2", out, merged)
    )


def _qwen3_vision_specs(d: VlmDims) -> Specs:
    dim, mlp, v = d.vision_dim, d.vision_dim * d.vision_mlp_ratio, "model.visual."
    patch = QWEN3_VL_PATCH
    specs: Specs = {
        v + "patch_embed.proj.weight": ((dim, 3, 2, patch, patch), (3 * 2 * patch**2) ** -0.5),
        v + "patch_embed.proj.bias": ((dim,), "zeros"),
        v + "pos_embed.weight": ((QWEN3_VL_POSITION_GRID**2, dim), 0.02),
        **_merger_specs(v + "merger.", dim, d.hidden, norm_dim=dim),
    }
    for j in range(d.vision_depth):
        specs |= _merger_specs(f"{v}deepstack_merger_list.{j}.", dim, d.hidden, dim * 4)
    for i in range(d.vision_depth):
        specs |= qwen_vision_block(f"{v}blocks.{i}.", dim, mlp, "qwen3_vl")
    return specs


def build_qwen3_vl(arch: object, dims: VlmDims, out_dir: Path) -> int:
    """Writes a tiny Qwen3-VL into `out_dir`; returns its parameters (`Arch.build`)."""
    spec = QWEN3_VL_TOKENIZER
    tok = train_tokenizer(spec, dims.vocab)
    tid = id_of(tok)
    write_tokenizer_files(spec, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", qwen3_vl_config(dims, tid))
    write_json(out_dir / "generation_config.json", qwen3_vl_generation_config(tid))
    preprocessor = {
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "image_std": [0.5, 0.5, 0.5],
        "merge_size": 2,
        "patch_size": QWEN3_VL_PATCH,
        "processor_class": "Qwen3VLProcessor",
        "size": QWEN3_VL_SIZE,
        "temporal_patch_size": 2,
    }
    write_json(out_dir / "preprocessor_config.json", preprocessor)
    video = {**preprocessor, "video_processor_type": "Qwen3VLVideoProcessor", "fps": 2}
    del video["image_processor_type"]
    write_json(out_dir / "video_preprocessor_config.json", video)
    special = [tid(t) for t, _ in spec.added_tokens]
    text = text_weights(dims, special, qk_norm=True, prefix="model.language_model.")
    tensors = {**text, **materialize(_qwen3_vision_specs(dims))}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
