"""`serve --models FILE`: the YAML file of the models one gateway serves, each in its own worker.

    max_loaded_models: 2        # workers alive at once (default: every model)
    memory_budget_gb: 16        # estimated resident size of all loaded models (default: none)
    idle_unload_seconds: 900    # unload a model idle this long (0, the default: never)
    models:
      - id: chat                # the name clients send (required, unique)
        path: /models/qwen3     # a checkpoint directory or a hub repo id (required)
        aliases: [gpt-4o-mini]  # more names that reach it
        kind: chat              # chat | speech | transcription | embed | rerank | image | video | auto (default:
                                # auto; tts and asr: older names of speech, transcription)
        pinned: true            # never evicted (default false)
        preload: true           # loaded at start (default false: on first request)
        adapter: /adapters/sql  # an mlx-lm LoRA adapter directory (chat models)
        options: {max_num_seqs: 8, kv_bits: 8, tool_call_parser: auto}
      - id: big
        remote: tcp://gpu-box:7070  # instead of path: a worker host's model (docs/models.md)
        options: {max_num_seqs: 4}  # REMOTE_OPTIONS only: the host has the worker's flags

`options` are the `serve` flags that apply to one model (OPTIONS, by their ServerConfig names).
A file that breaks a rule is refused at start with the line and the field named:
`models.yaml:7: models[1].kind: must be one of chat, speech, transcription, embed, rerank, image,
video, auto`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from gateway.config import ServerConfig
from protocol.endpoints import BadAddress, parse_tcp

KINDS = ("chat", "speech", "transcription", "embed", "rerank", "image", "video", "auto")
# The older names of two kinds, still read.
KIND_ALIASES = {"tts": "speech", "asr": "transcription"}
# ServerConfig fields one model's worker takes from its entry's `options`.
OPTIONS = frozenset(
    {
        "max_num_seqs", "max_queue", "queue_timeout", "max_tokens", "drain_timeout",
        "heartbeat_timeout", "prefill_step_size", "prefill_interleave", "draft_model", "num_draft_tokens",
        "speculative", "prompt_lookup_min", "prompt_lookup_max", "kv_bits",
        "kv_group_size", "quantized_kv_start", "max_kv_size", "dtype", "blas",
        "prefix_cache_bytes", "ssd_cache_dir", "ssd_cache_max_gb", "warm_prompts",
        "reasoning_parser", "tool_call_parser", "backend", "vision_cache_entries",
        "talker_max_frames", "voice_cache_bytes", "max_embedding_inputs", "max_embedding_tokens", "embedding_batch_tokens",
    }
)  # fmt: skip
# What a `remote` entry's options may set: the gateway's side of a model (admission, limits,
# liveness); the worker's own flags are given to `vllm-omni-mlx worker` on its host.
REMOTE_OPTIONS = frozenset(
    {"max_num_seqs", "max_queue", "queue_timeout", "max_tokens", "drain_timeout",
     "heartbeat_timeout"}
)  # fmt: skip
_TOP = ("max_loaded_models", "memory_budget_gb", "idle_unload_seconds", "models")
_ENTRY = ("id", "path", "aliases", "kind", "pinned", "preload", "adapter", "options", "remote")


class ModelsFileError(ValueError):
    """A models file that cannot be served; the text names the file, line and field."""


@dataclass(frozen=True)
class ModelSpec:
    id: str
    path: str
    kind: str = "auto"
    aliases: tuple[str, ...] = ()
    pinned: bool = False
    preload: bool = False
    adapter: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    remote: str | None = None  # tcp://HOST:PORT of a worker host (then path is "")


@dataclass(frozen=True)
class ModelsFile:
    models: tuple[ModelSpec, ...]
    max_loaded_models: int
    memory_budget_gb: float | None = None
    idle_unload_seconds: float = 0.0


def load_models_file(path: str | Path) -> ModelsFile:
    """Read and check `path`; ModelsFileError naming the line and field when it is wrong."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ModelsFileError(f"{path}: cannot read it: {exc.strerror}") from None
    return parse_models_file(text, str(path))


def parse_models_file(text: str, name: str = "models file") -> ModelsFile:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise ModelsFileError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return _Reader(name).file(root)


class _Reader:
    """Reads the composed YAML nodes, so each error can name the node's line."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, node: yaml.Node | None, path: str, message: str) -> ModelsFileError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return ModelsFileError(f"{self.name}{line}: {path}: {message}")

    def mapping(self, node: yaml.Node, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, path, "must be a mapping")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key not in allowed:
                raise self.fail(key_node, f"{path}.{key}" if path else str(key), "unknown field")
            if key in out:
                raise self.fail(key_node, f"{path}.{key}" if path else key, "given twice")
            out[key] = value_node
        return out

    def scalar(self, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, path, "must be a single value")
        try:
            return _construct(node)
        except (yaml.YAMLError, ValueError) as exc:  # a tag it cannot read: !foo, !!int x
            first = str(exc).strip().splitlines()[0]
            raise self.fail(node, path, f"cannot be read ({first})") from None

    def string(self, node: yaml.Node, path: str) -> str:
        value = self.scalar(node, path)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(node, path, "must be a non-empty string")
        return value

    def boolean(self, node: yaml.Node, path: str) -> bool:
        value = self.scalar(node, path)
        if not isinstance(value, bool):
            raise self.fail(node, path, "must be true or false")
        return value

    def number(self, node: yaml.Node, path: str, lo: float, integer: bool = False) -> float:
        value = self.scalar(node, path)
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < lo:
            what = "an integer" if integer else "a number"
            raise self.fail(node, path, f"must be {what} >= {lo:g}")
        return value

    def file(self, root: yaml.Node | None) -> ModelsFile:
        if root is None:
            raise self.fail(None, "models", "the file is empty: list the models to serve")
        top = self.mapping(root, "", _TOP)
        if "models" not in top:
            raise self.fail(root, "models", "is required: the list of models to serve")
        node = top["models"]
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.fail(node, "models", "must be a non-empty list")
        models = tuple(self.entry(item, f"models[{i}]") for i, item in enumerate(node.value))
        seen: dict[str, str] = {}
        for i, (model, item) in enumerate(zip(models, node.value, strict=True)):
            for name in (model.id, *model.aliases):
                if name in seen:
                    raise self.fail(
                        item, f"models[{i}]", f"the name {name!r} is also {seen[name]}'s"
                    )
                seen[name] = model.id
        max_loaded = len(models)
        if "max_loaded_models" in top:
            max_loaded = int(self.number(top["max_loaded_models"], "max_loaded_models", 1, True))
        budget = None
        if "memory_budget_gb" in top:
            budget = self.number(top["memory_budget_gb"], "memory_budget_gb", 0)
            if budget <= 0:
                raise self.fail(top["memory_budget_gb"], "memory_budget_gb", "must be > 0")
        idle = 0.0
        if "idle_unload_seconds" in top:
            idle = float(self.number(top["idle_unload_seconds"], "idle_unload_seconds", 0))
        pinned = sum(m.pinned and m.remote is None for m in models)  # remote: not loaded here
        if pinned > max_loaded:
            raise self.fail(
                top.get("max_loaded_models", root),
                "max_loaded_models",
                f"{pinned} models are pinned but only {max_loaded} may be loaded at once",
            )
        return ModelsFile(models, max_loaded, budget, idle)

    def entry(self, node: yaml.Node, path: str) -> ModelSpec:
        raw = self.mapping(node, path, _ENTRY)
        if "id" not in raw:
            raise self.fail(node, f"{path}.id", "is required")
        remote = self.remote(raw, path) if "remote" in raw else None
        if remote is None and "path" not in raw:
            raise self.fail(node, f"{path}.path", "is required (or remote: tcp://HOST:PORT)")
        kind = self.string(raw["kind"], f"{path}.kind") if "kind" in raw else "auto"
        kind = KIND_ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise self.fail(raw["kind"], f"{path}.kind", f"must be one of {', '.join(KINDS)}")
        aliases: tuple[str, ...] = ()
        if "aliases" in raw:
            seq = raw["aliases"]
            if not isinstance(seq, yaml.SequenceNode):
                raise self.fail(seq, f"{path}.aliases", "must be a list of names")
            aliases = tuple(self.string(n, f"{path}.aliases[{j}]") for j, n in enumerate(seq.value))
        adapter = self.string(raw["adapter"], f"{path}.adapter") if "adapter" in raw else None
        if adapter is not None and kind not in ("chat", "auto"):
            raise self.fail(raw["adapter"], f"{path}.adapter", "only chat models take adapters")
        options = self.options(raw["options"], f"{path}.options") if "options" in raw else {}
        if remote is not None:
            for key in options:
                if key not in REMOTE_OPTIONS:
                    raise self.fail(
                        raw["options"],
                        f"{path}.options.{key}",
                        "a worker flag: give it to `vllm-omni-mlx worker` on the remote host",
                    )
        return ModelSpec(
            id=self.string(raw["id"], f"{path}.id"),
            path=self.string(raw["path"], f"{path}.path") if remote is None else "",
            remote=remote,
            kind=kind,
            aliases=aliases,
            pinned=self.boolean(raw["pinned"], f"{path}.pinned") if "pinned" in raw else False,
            preload=self.boolean(raw["preload"], f"{path}.preload") if "preload" in raw else False,
            adapter=adapter,
            options=options,
        )

    def remote(self, raw: dict[str, Any], path: str) -> str:
        """A `remote: tcp://HOST:PORT` entry: the host names its model, so no path, no adapter."""
        address = self.string(raw["remote"], f"{path}.remote")
        try:
            parse_tcp(address)
        except BadAddress as exc:
            raise self.fail(raw["remote"], f"{path}.remote", str(exc)) from None
        for key in ("path", "adapter"):
            if key in raw:
                raise self.fail(
                    raw[key],
                    f"{path}.{key}",
                    "does not go with remote: the worker host's command line names it",
                )
        return address.strip()

    def options(self, node: yaml.Node, path: str) -> dict[str, Any]:
        raw = self.mapping(node, path, tuple(sorted(OPTIONS)))
        defaults = {f.name: f.default for f in fields(ServerConfig)}
        out = {}
        for key, value_node in raw.items():
            value = self.scalar(value_node, f"{path}.{key}")
            default = defaults[key]
            if key in _INT_OR_NONE:
                expected: type = int
            elif key in _FLOAT_OR_NONE:
                expected = float
            else:
                expected = type(default) if default is not None else str
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
                raise self.fail(value_node, f"{path}.{key}", f"must be {_named(expected)}")
            low = _AT_LEAST.get(key, 0)
            if expected in (int, float) and value < low:
                raise self.fail(value_node, f"{path}.{key}", f"must be >= {low}")
            out[key] = value
        return out


# Options whose default is None but whose value is an integer (a number).
_INT_OR_NONE = frozenset({"kv_bits", "max_kv_size", "num_draft_tokens"})
_FLOAT_OR_NONE = frozenset({"prefill_interleave"})
# The lowest value of a numeric option (the serve flag's range; the others: 0).
_AT_LEAST = {"max_num_seqs": 1, "prefill_step_size": 1, "num_draft_tokens": 1,
             "prompt_lookup_min": 1, "prompt_lookup_max": 1,
             "max_tokens": 1, "max_kv_size": 5, "kv_bits": 2}  # fmt: skip


def _named(kind: type) -> str:
    return {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "a string")


def _construct(node: yaml.ScalarNode) -> Any:
    """A scalar node's value as YAML's safe loader reads it (ints, floats, bools, strings)."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node)
    finally:
        loader.dispose()
