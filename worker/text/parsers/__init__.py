"""Output parsers: reasoning text and tool calls split off generated text, per model family.

`registry` names the families and detects them from a checkpoint; `output.OutputParser` is
what one request uses. Tool-call families live one per module (hermes, qwen3_coder,
llama3_json, mistral, deepseek; the rest through mlx-lm's own parsers in mlx_lm_families).
"""
