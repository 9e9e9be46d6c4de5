"""Per-request output features the text engine plugs in: constrained decoding and output parsing.

The engine calls `build_features` once per request, after the prompt is built, and then, per
generated token:
- adds `features.logits_processors` to the request's mlx-lm logits processors (signature
  `(tokens: mx.array, logits: mx.array) -> mx.array`, tokens = prompt + generated so far);
  they should run after the sampling processors (penalties, logit_bias) so their mask is final;
- feeds the text that survived the stop-string matcher to `features.parser.feed(text)`, which
  splits it into content, reasoning text and tool-call pieces (a ParsedDelta), and calls
  `features.parser.finish(finish_reason)` once at the end (it flushes what it held back and
  turns "stop" into "tool_calls" when the response called tools).

What the model supports (its reasoning and tool-call formats) is decided once by `configure`
(the `--reasoning-parser` / `--tool-call-parser` flags; "auto" or None detects from the chat
template and vocabulary, "none" switches off); without a `configure` call the tokenizer's
formats are detected on first use. Per request (op "chat"):
- reasoning is parsed unless the template kwargs switch thinking off (`enable_thinking` or
  `thinking` false); whether the answer starts inside reasoning comes from the prompt's tail;
- tool calls are parsed when the request has tools and tool_choice is not "none" (with "none"
  the tools are still rendered, as vLLM does, but no call is parsed);
- tool_choice "required" / a named function, and response_format, become a grammar that the
  logits processor enforces on the answer (not on the reasoning before it); `thinking_budget`
  forces the end of reasoning after that many reasoning tokens.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from protocol.inputs import ChatInputs, CompleteInputs
from worker.runtime.errors import bad_request
from worker.text.parsers import harmony, hermes
from worker.text.parsers.base import ParsedDelta
from worker.text.parsers.families import ToolFormat
from worker.text.parsers.output import OutputParser, ResponseParser
from worker.text.parsers.reasoning import ReasoningFormat, ReasoningParser
from worker.text.parsers.registry import (
    HARMONY,
    OFF,
    detect_harmony,
    detect_reasoning_format,
    detect_tool_format,
    reasoning_format,
    tool_format,
)
from worker.text.parsers.tool_base import ToolContext
from worker.text.prompts import chat_tools
from worker.text.tool_fallback import template_renders_tools

__all__ = [
    "ModelFeatures",
    "OutputParser",
    "ParsedDelta",
    "ResponseParser",
    "RequestFeatures",
    "build_features",
    "configure",
    "model_features",
]

log = logging.getLogger(__name__)

LogitsProcessor = Callable[[Any, Any], Any]

_PROMPT_TAIL_TOKENS = 24  # enough to see whether the prompt ends inside a think block


@dataclass(slots=True)
class RequestFeatures:
    logits_processors: list[LogitsProcessor] = field(default_factory=list)
    parser: ResponseParser = field(default_factory=OutputParser)


@dataclass(frozen=True)
class ModelFeatures:
    """What the loaded model's output looks like: its reasoning and tool-call formats."""

    reasoning: ReasoningFormat | None = None
    tools: ToolFormat | None = None
    think_ids: tuple[int, int] | None = None  # single-token reasoning markers, for the gate
    # OpenAI's harmony (GPT-OSS): channels carry reasoning, calls and content alike, so one
    # parser reads them all (worker/text/parsers/harmony.py); `reasoning` and `tools` are None.
    harmony: bool = False


_lock = threading.Lock()
_features: weakref.WeakKeyDictionary[Any, ModelFeatures] = weakref.WeakKeyDictionary()


def configure(
    reasoning_parser: str | None,
    tool_call_parser: str | None,
    tokenizer: Any,
    chat_template: str | None = None,
    warm: bool = True,
) -> ModelFeatures:
    """Decides the model's formats once after load (ValueError for an unknown parser name).

    Each name: None or "auto" detects from the checkpoint, "none" switches that parsing off,
    anything else names a format (`worker.text.parsers.registry`). `chat_template` overrides the
    tokenizer's template text for detection. `warm` builds llguidance's view of the tokenizer
    in a background thread (seconds for a large vocabulary), so that the first constrained
    request does not wait for it.
    """
    features = _decide(reasoning_parser, tool_call_parser, tokenizer, chat_template)
    if features.harmony:
        log.info("reasoning and tool-call parser: harmony")
    else:
        log.info(
            "reasoning parser: %s; tool-call parser: %s",
            features.reasoning.name if features.reasoning else "none",
            features.tools.name if features.tools else "none",
        )
    with _lock:
        _features[tokenizer] = features
    if warm:
        threading.Thread(
            target=_warm_constraints, args=(tokenizer,), name="constraints-warmup", daemon=True
        ).start()
    return features


def _warm_constraints(tokenizer: Any) -> None:
    from worker.text.constraints.llg import ll_tokenizer

    try:
        ll_tokenizer(tokenizer)
    except Exception:  # the first constrained request reports it
        log.warning("constrained decoding will not be available", exc_info=True)


def model_features(tokenizer: Any) -> ModelFeatures:
    """The configured features of this tokenizer's model, else auto-detected ones (cached)."""
    with _lock:
        known = _features.get(tokenizer)
    if known is None:
        known = _decide(None, None, tokenizer, None)
        with _lock:
            _features.setdefault(tokenizer, known)
    return known


def build_features(
    tokenizer: Any, inputs: ChatInputs | CompleteInputs, prompt_tokens: list[int]
) -> RequestFeatures:
    """The request's constraint processors and output parser (RequestError for bad input)."""
    # Imported here: llguidance and MLX are needed only by requests that constrain output.
    from worker.text.constraints.plan import plan_constraint

    model = model_features(tokenizer)
    chat = isinstance(inputs, ChatInputs)
    sampling = inputs.sampling
    options = RequestOptions.of(inputs) if chat else RequestOptions()
    if model.harmony:
        if isinstance(inputs, ChatInputs):
            return _harmony_features(tokenizer, model, options, inputs)
        model = replace(model, harmony=False)  # a completion's text is the model's, as is
    reasoning = model.reasoning if chat and options.thinking else None
    starts_inside = False
    if reasoning is not None:
        tail = tokenizer.decode(list(prompt_tokens[-_PROMPT_TAIL_TOKENS:]))
        starts_inside = reasoning.starts_inside(tail)
    if options.tools and not template_renders_tools(tokenizer):
        # The tools are in the prompt as a Hermes block (tool_fallback.py): read Hermes calls.
        model = replace(model, tools=hermes.FORMAT)
    tool_parser = None
    if options.tools and options.tool_choice != "none":
        if model.tools is None:
            raise bad_request(
                "tools are not supported by this model: its chat template has no known "
                "tool-call format (the server's --tool-call-parser names one)"
            )
        context = ToolContext.of(options.tools, options.parallel and options.named is None)
        tool_parser = model.tools.make_parser(context)
    processor = plan_constraint(
        tokenizer,
        model,
        options,
        sampling.constraint,
        reasoning_open=reasoning is not None,
        starts_inside=starts_inside,
        max_tokens=sampling.max_tokens,
    )
    parser = OutputParser(
        ReasoningParser(reasoning, starts_inside) if reasoning is not None else None,
        tool_parser,
        cut_short=(lambda: processor.closed_out) if processor is not None else None,
    )
    return RequestFeatures([processor] if processor is not None else [], parser)


def _harmony_features(
    tokenizer: Any, model: ModelFeatures, options: RequestOptions, inputs: ChatInputs
) -> RequestFeatures:
    """A chat on a harmony model: calls parsed unless tool_choice is "none", and reasoning
    always (its analysis channel is never content, whatever the thinking switch says)."""
    from worker.text.constraints.plan import plan_constraint

    context = None
    if options.tools and options.tool_choice != "none":
        context = ToolContext.of(options.tools, options.parallel and options.named is None)
    processor = plan_constraint(
        tokenizer,
        model,
        options,
        inputs.sampling.constraint,
        reasoning_open=True,
        starts_inside=False,
        max_tokens=inputs.sampling.max_tokens,
    )
    parser = harmony.HarmonyParser(
        context, cut_short=(lambda: processor.closed_out) if processor is not None else None
    )
    return RequestFeatures([processor] if processor is not None else [], parser)


@dataclass(frozen=True)
class RequestOptions:
    """A chat request's tool and thinking options, validated."""

    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str = "auto"  # "auto" | "none" | "required" | "named"
    named: str | None = None  # the function of a named tool_choice
    parallel: bool = True
    thinking: bool = True  # False: the template kwargs switched thinking off
    thinking_budget: int | None = None

    @classmethod
    def of(cls, inputs: ChatInputs) -> RequestOptions:
        tools = tuple(chat_tools(inputs))
        choice, named = _tool_choice(inputs.tool_choice, tools)
        parallel = inputs.parallel_tool_calls
        budget = inputs.thinking_budget
        if budget is not None and budget < 1:
            raise bad_request(f"thinking_budget must be at least 1, got {budget}")
        kwargs = inputs.chat_template_kwargs
        thinking = not any(kwargs.get(key) is False for key in ("enable_thinking", "thinking"))
        return cls(tools, choice, named, parallel is not False, thinking, budget)


def _tool_choice(value: Any, tools: tuple[Mapping[str, Any], ...]) -> tuple[str, str | None]:
    if value is None or value in ("auto", "none"):
        return value or "auto", None
    if value == "required":
        named = None
    elif isinstance(value, Mapping) and isinstance((value.get("function") or {}).get("name"), str):
        named = value["function"]["name"]
    else:
        raise bad_request(
            "tool_choice must be 'auto', 'none', 'required' or "
            '{"type": "function", "function": {"name": ...}}'
        )
    if not tools:
        raise bad_request("tool_choice 'required' or a named function needs tools")
    if named is not None and named not in {t["function"]["name"] for t in tools}:
        raise bad_request(f"tool_choice names function {named!r}, which is not in tools")
    return ("named" if named is not None else "required"), named


def _decide(
    reasoning_name: str | None, tool_name: str | None, tokenizer: Any, chat_template: str | None
) -> ModelFeatures:
    template = chat_template if chat_template is not None else _template_text(tokenizer)
    vocab = tokenizer.get_vocab()
    names = (reasoning_name, tool_name)
    if any(name in HARMONY for name in names):
        missing = [m for m in (harmony.MESSAGE, harmony.END, harmony.CHANNEL) if m not in vocab]
        if missing:
            raise ValueError(f"the harmony parser needs {', '.join(missing)} in the vocabulary")
        return ModelFeatures(harmony=True)
    if all(name in (None, "auto") for name in names) and detect_harmony(template, vocab):
        return ModelFeatures(harmony=True)
    if reasoning_name in OFF:
        reasoning = None
    elif reasoning_name in (None, "auto"):
        markers = (getattr(tokenizer, "think_start", None), getattr(tokenizer, "think_end", None))
        reasoning = detect_reasoning_format(template, vocab, markers)
    else:
        reasoning = reasoning_format(reasoning_name)
    if tool_name in OFF:
        tools = None
    elif tool_name in (None, "auto"):
        tools = detect_tool_format(template, _tokenizer_config(tokenizer))
    else:
        tools = tool_format(tool_name)
    think_ids = None
    if reasoning is not None and reasoning.start in vocab and reasoning.end in vocab:
        think_ids = (vocab[reasoning.start], vocab[reasoning.end])
    return ModelFeatures(reasoning, tools, think_ids)


def _tokenizer_config(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer's config, with the `chat_template_type` of the Python renderer mlx-lm
    gave it in place of a Jinja template (e.g. DeepSeek-V3.2's), when it has one."""
    config = getattr(tokenizer, "init_kwargs", None)
    out = dict(config) if isinstance(config, Mapping) else {}
    module = getattr(getattr(tokenizer, "_chat_template", None), "__module__", None) or ""
    if module.startswith("mlx_lm.chat_templates."):
        out.setdefault("chat_template_type", module.rsplit(".", 1)[-1])
    return out


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, Mapping):  # several named templates (e.g. "default", "tool_use")
        return "\n".join(str(t) for t in template.values())
    if isinstance(template, list):
        return "\n".join(str(t.get("template", "")) for t in template if isinstance(t, Mapping))
    return template if isinstance(template, str) else ""
