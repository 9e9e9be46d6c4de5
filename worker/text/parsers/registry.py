"""Parser names (`--tool-call-parser`, `--reasoning-parser`) and detection from the checkpoint.

Detection reads the chat template first (the template is what taught the model its syntax),
then the parser type mlx-lm's loader put into the tokenizer config (explicit
`tool_parser_type` or mlx-lm's own inference). Reasoning is detected only when the template
itself uses the think markers and the vocabulary has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worker.text.parsers import (
    deepseek,
    deepseek_dsml,
    harmony,
    hermes,
    llama3_json,
    mistral,
    mlx_lm_families,
    qwen3_coder,
)
from worker.text.parsers.families import ToolFormat
from worker.text.parsers.reasoning import FORMATS as REASONING_FORMATS
from worker.text.parsers.reasoning import ReasoningFormat

TOOL_FORMATS: dict[str, ToolFormat] = {
    f.name: f
    for f in (
        hermes.FORMAT,
        qwen3_coder.FORMAT,
        llama3_json.FORMAT,
        mistral.FORMAT,
        mistral.FORMAT_ARGS,
        deepseek.FORMAT_V3,
        deepseek.FORMAT_V31,
        deepseek_dsml.FORMAT,
    )
}
ALIASES = {
    "qwen": "hermes",
    "qwen2_5": "hermes",
    "qwen3": "hermes",
    "json_tools": "hermes",
    "llama3": "llama3_json",
    "llama": "llama3_json",
    "deepseek": "deepseek_v3",
    "deepseek_r1": "deepseek_v3",
    "deepseek_v3_1": "deepseek_v31",
    "deepseek_v3_2": "deepseek_v32",
}
DSML_MARK = deepseek_dsml.DSML
# Names that switch parsing off.
OFF = ("none", "off")
# Names of OpenAI's harmony format (GPT-OSS), which carries reasoning and tool calls alike:
# either flag may name it (vLLM calls it "openai" and "openai_gptoss").
HARMONY = ("harmony", "openai", "openai_gptoss", "gpt_oss")


def tool_format_names() -> list[str]:
    """The call-only formats' names (HARMONY's are chosen in worker/text/features.py)."""
    return sorted({*TOOL_FORMATS, *ALIASES, *mlx_lm_families.available()})


def detect_harmony(chat_template: str | None, vocab: Mapping[str, int]) -> bool:
    """Whether the template writes harmony messages the vocabulary has the markers of."""
    template = chat_template or ""
    markers = (harmony.CHANNEL, harmony.MESSAGE)
    return all(m in template and m in vocab for m in markers)


def tool_format(name: str) -> ToolFormat:
    """The tool-call format called `name` (ours, an alias, or an mlx-lm parser module)."""
    name = ALIASES.get(name, name)
    if name in TOOL_FORMATS:
        return TOOL_FORMATS[name]
    if name in mlx_lm_families.available():
        return mlx_lm_families.tool_format(name)
    known = ", ".join(sorted({*tool_format_names(), *HARMONY}))
    raise ValueError(f"unknown tool-call parser {name!r} (known: {known}, auto, none)")


def reasoning_format(name: str) -> ReasoningFormat:
    if name in REASONING_FORMATS:
        return REASONING_FORMATS[name]
    known = ", ".join(sorted({*REASONING_FORMATS, *HARMONY}))
    raise ValueError(f"unknown reasoning parser {name!r} (known: {known}, auto, none)")


def detect_tool_format(
    chat_template: str | None, tokenizer_config: Mapping[str, Any] | None = None
) -> ToolFormat | None:
    """The checkpoint's tool-call format from its template, else from mlx-lm's config entry."""
    template = chat_template or ""
    if (
        DSML_MARK in template
        or (tokenizer_config or {}).get("chat_template_type") == "deepseek_v32"
    ):
        return TOOL_FORMATS["deepseek_v32"]
    if "<tool_call>" in template and "<function=" in template:
        return TOOL_FORMATS["qwen3_coder"]
    if "[TOOL_CALLS]" in template:
        return TOOL_FORMATS["mistral_v11" if "[ARGS]" in template else "mistral"]
    if "tool▁calls▁begin" in template:
        return TOOL_FORMATS["deepseek_v3" if "```json" in template else "deepseek_v31"]
    if "<tool_call>" in template:
        return TOOL_FORMATS["hermes"]
    if "<|python_tag|>" in template or ('"parameters": ' in template and "<|eot_id|>" in template):
        return TOOL_FORMATS["llama3_json"]
    configured = (tokenizer_config or {}).get("tool_parser_type")
    if isinstance(configured, str):
        try:
            return tool_format(configured)
        except (ValueError, ImportError):
            return None
    return None


def detect_reasoning_format(
    chat_template: str | None,
    vocab: Mapping[str, int],
    think_markers: tuple[str | None, str | None] = (None, None),
) -> ReasoningFormat | None:
    """The checkpoint's reasoning format, when its template uses think markers it can emit.

    `think_markers` are the (start, end) mlx-lm inferred for the tokenizer; they cover
    families whose markers are not `<think>` (e.g. `<longcat_think>`).
    """
    template = chat_template or ""
    start, end = "<think>", "</think>"
    if start in vocab and end in vocab and (start in template or end in template):
        # DeepSeek-R1's template never opens the block itself; V3.1's is switched by `thinking`.
        if "<｜Assistant｜>" in template and "thinking" not in template:
            return REASONING_FORMATS["deepseek_r1"]
        return REASONING_FORMATS["qwen3"]
    other_start, other_end = think_markers
    if other_start and other_end and (other_start in template or other_end in template):
        return ReasoningFormat(f"auto:{other_start}", other_start, other_end)
    return None
