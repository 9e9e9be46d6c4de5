"""Parse Anthropic Messages bodies (`/v1/messages`, `/v1/messages/count_tokens`).

Field policy, as for OpenAI: honoured, accepted without local meaning, or a 400 naming the
field. Honoured: `model`, `messages`, `system`, `max_tokens` (required), `stop_sequences`,
`stream`, `temperature`, `top_p`, `top_k`, `tools`, `tool_choice` (auto / any -> required /
tool -> named / none; `disable_parallel_tool_use`), `thinking` (enabled -> the template's
`enable_thinking` plus a `thinking_budget`; disabled -> off; adaptive -> on; `display:
"omitted"` hides the thinking text), `output_config.format` (JSON Schema, by constrained
decoding), `output_config.effort` (the template's `reasoning_effort`, read by GPT-OSS's), and the extensions `min_p`, `repetition_penalty`, `seed`, `logit_bias`,
`chat_template_kwargs`.
`context_management` is validated here and applied by the route before the prompt is built
(gateway/api/anthropic_messages/context_edits.py).
Accepted: `metadata`, `service_tier`, `cache_control` (a prefix-cache hint: the prefix cache
is automatic), `output_config.task_budget`, `thinking.block_binding`,
`diagnostics`, `inference_geo`, `speed`,
`user_profile_id`, `workspace_id`, `billing_policy`, `fallbacks` and `fallback_credit_token`
(no model here declines a request, so no fallback ever runs), `container`, `thread`,
`compaction` when null and `mcp_servers` when empty.
Refused (400): a `container`, a `thread` (server-held conversation state), `compaction`
(server-side summarization), MCP servers (the server would call them).
The SDKs' `betas` travel as the `anthropic-beta` header, which is accepted, as is
`anthropic-version`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.api.anthropic_messages.content import convert_messages, convert_tools, system_messages
from gateway.api.anthropic_messages.surface import COUNT, CREATE, MAX_STOP_SEQUENCES
from gateway.generation.request import GenerationRequest
from gateway.generation.structured import check_keys, json_schema
from gateway.generation.tools import named_choice, tool_inputs
from gateway.http.errors import invalid, unsupported
from gateway.media.parts import MediaCollector
from gateway.schema import readers as f
from protocol.inputs import ChatInputs, Constraint, SamplingParams


@dataclass(slots=True)
class MessagesRequest:
    generation: GenerationRequest
    omit_thinking: bool = False  # thinking.display == "omitted"
    stop_sequences: list[str] = field(default_factory=list)


def parse_create(body: dict, media: MediaCollector | None = None) -> MessagesRequest:
    """A `/v1/messages` body -> the generation request, or a 400 naming a field. `media` says
    which media the model accepts (default: none) and collects the image blocks."""
    CREATE.check(body)
    return read_create(body, media)


def read_create(body: dict, media: MediaCollector | None = None) -> MessagesRequest:
    """parse_create of a body that already passed `CREATE.check` (the route checks it before a
    model is loaded for it, then reads it once the engine is known)."""
    media = media if media is not None else MediaCollector()
    max_tokens = f.integer(body, "max_tokens")
    assert max_tokens is not None  # required by the table
    fields, omit_thinking = _input_fields(body, max_tokens, media)
    stop = _stop_sequences(body)
    sampling = SamplingParams(
        max_tokens=max_tokens,
        # Ranges checked by the table (gateway/api/anthropic_messages/surface.CREATE).
        temperature=f.plain_number(body, "temperature"),
        top_p=f.plain_number(body, "top_p"),
        top_k=f.integer(body, "top_k"),
        min_p=f.plain_number(body, "min_p"),
        repetition_penalty=f.plain_number(body, "repetition_penalty"),
        seed=f.seed(body),
        logit_bias=f.logit_bias(body),
        stop=stop,
        constraint=_constraint(body, fields),
    )
    generation = GenerationRequest(
        model=_model(body),
        inputs=ChatInputs(sampling=sampling, **fields),
        stream=bool(f.boolean(body, "stream")),
        media=tuple(media.items),
        max_tokens_field="max_tokens",
    )
    return MessagesRequest(generation, omit_thinking, stop)


def parse_count(body: dict) -> tuple[str, ChatInputs]:
    """A `/v1/messages/count_tokens` body -> (model, the chat inputs to count)."""
    COUNT.check(body)
    # The worker counts text tokens only: an image's token count depends on its processor.
    refusing = MediaCollector(refusal="image blocks in count_tokens (images are not counted)")
    fields, _ = _input_fields(body, None, refusing)
    _constraint(body, fields)
    # Counting samples nothing: the prompt is built as the request's would be, then measured.
    return _model(body), ChatInputs(sampling=SamplingParams(max_tokens=1), **fields)


def _model(body: dict) -> str:
    model = f.string(body, "model")
    if not model:
        raise invalid("model", "`model` is required")
    return model


def _input_fields(
    body: dict, max_tokens: int | None, media: MediaCollector
) -> tuple[dict[str, Any], bool]:
    """The ChatInputs fields but sampling, and whether thinking text is to be omitted."""
    messages = system_messages(body.get("system")) + convert_messages(body.get("messages"), media)
    kwargs = dict(f.obj(body, "chat_template_kwargs") or {})
    inputs: dict[str, Any] = {"messages": messages, "chat_template_kwargs": kwargs}
    choice, parallel = _tool_choice(body.get("tool_choice"))
    inputs.update(tool_inputs(convert_tools(body.get("tools")), choice, parallel))
    omit_thinking = _thinking(body.get("thinking"), inputs, max_tokens)
    return inputs, omit_thinking


def _tool_choice(choice: Any) -> tuple[str | dict[str, Any] | None, bool | None]:
    if choice is None:
        return None, None
    if not isinstance(choice, dict):
        raise invalid("tool_choice", "`tool_choice` must be an object")
    kind = choice.get("type")
    check_keys(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise invalid(
            "tool_choice.disable_parallel_tool_use",
            "`tool_choice.disable_parallel_tool_use` must be a boolean",
        )
    parallel = None if disable is None else not disable
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.name", "`tool_choice.name` must be a string")
        return named_choice(name), parallel
    raise invalid("tool_choice.type", "`tool_choice.type` must be 'auto', 'any', 'tool' or 'none'")


def _thinking(thinking: Any, inputs: dict[str, Any], max_tokens: int | None) -> bool:
    """Applies `thinking` to the inputs; returns whether its text is to be omitted."""
    if thinking is None:
        return False  # the chat template's own default
    if not isinstance(thinking, dict):
        raise invalid("thinking", "`thinking` must be an object")
    check_keys(thinking, {"type", "budget_tokens", "display", "block_binding"}, "thinking")
    f.obj(thinking, "block_binding")  # no conversation check is made of unsigned thinking here
    kind = thinking.get("type")
    kwargs = inputs["chat_template_kwargs"]
    if kind == "disabled":
        kwargs["enable_thinking"] = False
        return False
    if kind not in ("enabled", "adaptive", "between_tools"):
        raise invalid(
            "thinking.type", "`thinking.type` must be 'enabled', 'adaptive' or 'disabled'"
        )
    kwargs["enable_thinking"] = True
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise invalid(
                "thinking.budget_tokens", "`thinking.budget_tokens` must be a positive integer"
            )
        if max_tokens is not None and budget >= max_tokens:
            raise invalid(
                "thinking.budget_tokens", "`thinking.budget_tokens` must be less than `max_tokens`"
            )
        inputs["thinking_budget"] = budget
    display = thinking.get("display")
    # "updates" (progress notes instead of the thinking itself) is served as "summarized", the
    # closest this server has: the thinking text streams as it is written (docs/clients.md).
    if display not in (None, "summarized", "omitted", "updates"):
        raise invalid(
            "thinking.display", "`thinking.display` must be 'summarized', 'omitted' or 'updates'"
        )
    return display == "omitted"


def _constraint(body: dict, inputs: dict[str, Any]) -> Constraint | None:
    config = f.obj(body, "output_config")
    if config is None:
        return None
    check_keys(config, {"effort", "format", "task_budget"}, "output_config")
    _task_budget(config.get("task_budget"))
    effort = config.get("effort")
    if effort is not None and not isinstance(effort, str):
        raise invalid("output_config.effort", "`output_config.effort` must be a string")
    if effort is not None:
        # Templates that take an effort read it as `reasoning_effort` (GPT-OSS's harmony).
        inputs["chat_template_kwargs"].setdefault("reasoning_effort", effort)
    spec = config.get("format")
    if spec is None:
        return None
    path = "output_config.format"
    if not isinstance(spec, dict) or spec.get("type") != "json_schema":
        raise invalid(path, "`output_config.format` must be {'type': 'json_schema', 'schema': ...}")
    check_keys(spec, {"type", "schema"}, path)
    if not isinstance(spec.get("schema"), dict):
        raise invalid(f"{path}.schema", f"`{path}.schema` must be a JSON Schema object")
    if inputs.get("tools") and inputs.get("tool_choice", "auto") != "none":
        raise unsupported(path, "a JSON output format together with callable tools")
    return json_schema(spec["schema"], None, None, path)


def _task_budget(budget: Any) -> None:
    """`output_config.task_budget` is accepted: Anthropic's models are told the budget left,
    which local chat templates have no place for (it is validated, not applied)."""
    if budget is None:
        return
    path = "output_config.task_budget"
    if not isinstance(budget, dict) or budget.get("type") != "tokens":
        raise invalid(path, f"`{path}` must be {{'type': 'tokens', 'total': N}}")
    check_keys(budget, {"type", "total", "remaining"}, path)
    f.integer(budget, "total", 0)
    f.integer(budget, "remaining", 0)


def _stop_sequences(body: dict) -> list[str]:
    value = body.get("stop_sequences") or []  # an array of non-empty strings (the table)
    if len(value) > MAX_STOP_SEQUENCES:
        raise invalid("stop_sequences", f"at most {MAX_STOP_SEQUENCES} `stop_sequences`")
    for item in value:
        if not isinstance(item, str) or not item:
            raise invalid("stop_sequences", "`stop_sequences` must be non-empty strings")
    return list(value)
