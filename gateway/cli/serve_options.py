"""`serve`'s generation and media flags, and the ServerConfig fields they become; shared with
`worker --listen` (gateway/cli/remote.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from gateway.cli.model_source import resolved_models
from gateway.config import ServerConfig

DEFAULTS = ServerConfig(model="", served_model_name="")
LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]

# (--flag-name, or it and its older aliases; click type or None; help): ServerConfig.flag_name
Flag = tuple[str | tuple[str, ...], Any, str]


def config_flags(command: Any, flags: list[Flag]) -> Any:
    """`command` with a click option per flag (a name, or the name and its older aliases),
    defaulting to ServerConfig's value."""
    for flag, kind, help_text in reversed(flags):
        names = (flag,) if isinstance(flag, str) else flag
        default = getattr(DEFAULTS, names[0][2:].replace("-", "_"))
        default = str(default) if isinstance(kind, click.Choice) and default else default
        option = click.option(*names, type=kind, default=default, show_default=True, help=help_text)
        command = option(command)
    return command


def generation_options(command: Any) -> Any:
    """The worker's generation flags (ServerConfig fields of the same names)."""
    options: list[Flag] = [
        ("--prefill-step-size", click.IntRange(min=1), "Prompt tokens per prefill chunk."),
        (
            "--prefill-interleave",
            click.FloatRange(min=0),
            "Beside decoding streams a prefill chunk (or a unit of an image's vision encoding) "
            "takes at most this x their decode step [default: 0.7; 0: whole chunks].",
        ),
        ("--draft-model", None, "Draft model (directory or hub id): speculative decoding."),
        (
            "--num-draft-tokens",
            click.IntRange(min=1, max=16),
            "Tokens a sequence may propose per verification step (speculative decoding) "
            "[default: prompt lookup 5, a draft model 3].",
        ),
        (
            "--speculative",
            click.Choice(["none", "ngram", "draft", "auto"]),
            "Speculative decoding with continuous batching: ngram (prompt lookup), draft "
            "(--draft-model), auto (the draft model, else prompt lookup, where either can run), "
            "none.",
        ),
        ("--prompt-lookup-min", click.IntRange(min=1, max=8), "ngram: shortest n-gram matched."),
        ("--prompt-lookup-max", click.IntRange(min=1, max=8), "ngram: longest n-gram matched."),
        ("--kv-bits", click.Choice(["2", "3", "4", "5", "6", "8"]), "Quantize the KV cache."),
        ("--kv-group-size", click.Choice(["32", "64", "128"]), "KV quantization group size."),
        ("--quantized-kv-start", click.IntRange(min=0), "Quantize the KV cache past this."),
        ("--max-kv-size", click.IntRange(min=5), "Rotating KV cache of this many tokens."),
        ("--dtype", click.Choice(["auto", "float32", "float16", "bfloat16"]), "Weight dtype."),
        ("--blas", click.Choice(["auto", "bundled", "openblas"]), "Linux CPU: OpenBLAS use."),
        ("--prefix-cache-bytes", click.IntRange(min=0), "Prefix cache budget; 0: off."),
        ("--ssd-cache-dir", click.Path(file_okay=False), "Also keep prefix caches here."),
        ("--ssd-cache-max-gb", click.FloatRange(min=0), "Size cap of --ssd-cache-dir."),
        ("--warm-prompts", click.Path(exists=True, dir_okay=False), "JSONL prompts to cache."),
        (
            ("--speech-model", "--tts-model"),
            None,
            "Speech model (text to speech) served next to MODEL.",
        ),
        (
            ("--transcription-model", "--asr-model"),
            None,
            "Transcription model (speech to text) served next to MODEL.",
        ),
        ("--reasoning-parser", None, "auto | none | qwen3 | deepseek_r1."),
        ("--tool-call-parser", None, "auto | none | hermes | qwen3_coder | llama3_json | ..."),
        (
            "--chat-template",
            click.Path(exists=True, dir_okay=False),
            "A Jinja chat template file used instead of the checkpoint's (mlx-lm models).",
        ),
        ("--vision-cache-entries", click.IntRange(min=0), "Image features kept for reuse."),
        ("--talker-max-frames", click.IntRange(min=1), "Qwen3-Omni talker: frames (12.5/s)."),
        (
            "--voice-cache-bytes",
            click.IntRange(min=0),
            "Qwen3-TTS voices' prefix KV, x-vectors and reference codes kept; 0: none.",
        ),
    ]
    return config_flags(command, options)


def lora_options(command: Any) -> Any:
    """LoRA adapters served beside MODEL, each a model of its own name (vLLM's flags)."""
    command = click.option(
        "--max-loras",
        type=click.IntRange(min=1),
        default=DEFAULTS.max_loras,
        show_default=True,
        help="LoRA adapters loaded at once, at most (--lora-modules and /v1/load_lora_adapter).",
    )(command)
    return click.option(
        "--lora-modules",
        multiple=True,
        metavar="NAME=PATH",
        help="An mlx-lm LoRA adapter directory served beside MODEL as the model NAME "
        "(repeatable); more load at run time (POST /v1/load_lora_adapter, admin key).",
    )(command)


def lora_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's adapter fields from --lora-modules and --max-loras, each checked."""
    from gateway.workers.lora_adapters import adapter_problem

    modules: dict[str, str] = {}
    for entry in options["lora_modules"]:
        name, _, path = entry.partition("=")
        found = adapter_problem(name, path) if path else ("", f"{entry!r} is not NAME=PATH")
        problem = found[1] if found is not None else None
        if problem is None and name in modules:
            problem = f"two adapters are named {name!r}"
        if problem is not None:
            raise click.BadParameter(problem, param_hint="--lora-modules")
        modules[name] = os.path.abspath(path)
    if len(modules) > options["max_loras"]:
        raise click.BadParameter(
            f"{len(modules)} adapters, more than --max-loras {options['max_loras']}",
            param_hint="--lora-modules",
        )
    return {"lora_modules": tuple(modules.items()), "max_loras": options["max_loras"]}


def media_options(command: Any) -> Any:
    """Limits on images and audio in requests (checked by the gateway: gateway/media/)."""
    options: list[Flag] = [
        (
            "--allowed-local-media-path",
            click.Path(exists=True, file_okay=False),
            "Serve file:// URLs and paths inside this directory [default: refuse them].",
        ),
        ("--media-max-bytes", click.IntRange(min=1), "Size cap of one image or audio clip."),
        ("--media-fetch-timeout", click.FloatRange(min=0, min_open=True), "Seconds per fetch."),
        ("--max-image-pixels", click.IntRange(min=1), "Pixel cap (width x height) of an image."),
    ]
    return config_flags(command, options)


def media_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's media fields from the media flags."""
    path = options["allowed_local_media_path"]
    return {
        "allowed_local_media_path": os.path.realpath(path) if path else None,
        "media_max_bytes": options["media_max_bytes"],
        "media_fetch_timeout": options["media_fetch_timeout"],
        "max_image_pixels": options["max_image_pixels"],
    }


def generation_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig fields from the generation flags (the draft model resolved like MODEL)."""
    from protocol.launch.blas import BlasUnavailable, blas_environment
    from protocol.launch.warm_prompts import WarmPromptsError, load_warm_prompts

    fields = {
        name: options[name]
        for name in (
            "prefill_step_size", "prefill_interleave", "num_draft_tokens", "speculative",
            "prompt_lookup_min", "prompt_lookup_max", "quantized_kv_start", "max_kv_size",
            "dtype", "blas", "prefix_cache_bytes", "ssd_cache_dir", "ssd_cache_max_gb",
            "warm_prompts", "reasoning_parser", "tool_call_parser", "vision_cache_entries",
            "talker_max_frames", "voice_cache_bytes",
        )
    }  # fmt: skip
    fields["chat_template"] = chat_template_file(options["chat_template"])
    fields["kv_bits"] = int(options["kv_bits"]) if options["kv_bits"] else None
    fields["kv_group_size"] = int(options["kv_group_size"])
    fields.update(resolved_models(options, ("draft_model", "speech_model", "transcription_model")))
    try:
        blas_environment(options["blas"], {})
        if options["warm_prompts"]:
            load_warm_prompts(options["warm_prompts"])
    except (BlasUnavailable, WarmPromptsError) as exc:
        raise click.ClickException(str(exc)) from exc
    return fields


MAX_CHAT_TEMPLATE_BYTES = 1 << 20


def chat_template_file(path: str | None) -> str | None:
    """--chat-template as an absolute path, once it reads as UTF-8 text of at most 1 MiB (the
    worker renders it; a template that does not compile stops the worker's load, naming it)."""
    if path is None:
        return None
    data = Path(path).read_bytes()
    if len(data) > MAX_CHAT_TEMPLATE_BYTES or b"\0" in data:
        raise click.BadParameter(
            f"{path} is not a chat template (binary, or over 1 MiB)", param_hint="--chat-template"
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(
            f"{path} is not UTF-8 text", param_hint="--chat-template"
        ) from None
    return os.path.abspath(path)
