"""The `vllm-omni-mlx` command: `serve` a model, `models load` another one, read `stats`.

`serve` runs in the gateway process, which never imports mlx: the embedded default's models
are fetched, converted or built by subprocesses, and the worker that loads the model is
spawned by the engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import click

from bench.options import bench_options
from convert.cli import convert_command
from gateway.cli.aliases import alias_config, alias_options
from gateway.cli.distributed import distributed_config, distributed_options
from gateway.cli.embeddings import embedding_config, embedding_options
from gateway.cli.speech import tts
from gateway.config import ServerConfig
from protocol.log_format import LOG_FORMATS, configure_logging

DEFAULTS = ServerConfig(model="", served_model_name="")
DEFAULT_URL = "http://127.0.0.1:8000"
LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """OpenAI-compatible model server for MLX: an HTTP gateway and an MLX worker process."""


def serve_model(model: str | None, options: dict[str, Any]) -> tuple[str, str]:
    """`resolve(MODEL)`, or without MODEL the embedded default (gateway/cli/default_models.py),
    whose speech models fill `--tts-model` / `--asr-model` unless they were given."""
    from gateway.cli import default_models

    if model is None:
        echo = partial(click.echo, err=True)
        echo("No MODEL given: serving the embedded default (SmolLM2-135M-Instruct, Whisper).")
        try:
            defaults = default_models.embedded_default(echo)
        except default_models.DefaultUnavailable as exc:
            raise click.ClickException(f"the embedded default is unavailable: {exc}") from exc
        options["asr_model"] = options["asr_model"] or defaults.asr
        options["tts_model"] = options["tts_model"] or defaults.tts
        if options["dtype"] == "auto" and default_models.default_dtype() is None:
            # The CPU's fast path: float32 matmuls on BLAS. mlx-audio would build Whisper in
            # float16 (its own single-threaded kernels here: 11-14 s a sentence, not 1.8 s).
            options["dtype"] = "float32"
        return defaults.chat, defaults.name
    return resolve(model)


def resolve(model: str) -> tuple[str, str]:
    """(checkpoint directory, default served name) for MODEL, downloading a hub id if needed."""
    from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model

    try:
        resolved = resolve_model(model)
    except (ModelNotFound, ModelDownloadFailed) as exc:
        raise click.ClickException(str(exc)) from exc
    return resolved.path, resolved.name


def generation_options(command: Any) -> Any:
    """The worker's generation flags (ServerConfig fields of the same names)."""
    options = [
        ("--prefill-step-size", click.IntRange(min=1), "Prompt tokens per prefill chunk."),
        (
            "--prefill-interleave",
            click.FloatRange(min=0),
            "Beside decoding streams a prefill chunk takes at most this x their decode step "
            "[default: 0.7; 0: whole chunks].",
        ),
        ("--draft-model", None, "Draft model (directory or hub id): speculative decoding."),
        ("--num-draft-tokens", click.IntRange(min=1), "Draft tokens per verification step."),
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
        ("--tts-model", None, "TTS checkpoint served next to MODEL (speech out)."),
        ("--asr-model", None, "Speech-recognition checkpoint served next to MODEL (speech in)."),
        ("--reasoning-parser", None, "auto | none | qwen3 | deepseek_r1."),
        ("--tool-call-parser", None, "auto | none | hermes | qwen3_coder | llama3_json | ..."),
        ("--vision-cache-entries", click.IntRange(min=0), "Image features kept for reuse."),
        ("--talker-max-frames", click.IntRange(min=1), "Qwen3-Omni talker: frames (12.5/s)."),
    ]
    for flag, kind, help_text in reversed(options):
        default = getattr(DEFAULTS, flag[2:].replace("-", "_"))
        default = str(default) if isinstance(kind, click.Choice) and default else default
        command = click.option(flag, type=kind, default=default, show_default=True, help=help_text)(
            command
        )
    return command


def media_options(command: Any) -> Any:
    """Limits on images and audio in requests (checked by the gateway: gateway/media/)."""
    options = [
        (
            "--allowed-local-media-path",
            click.Path(exists=True, file_okay=False),
            "Serve file:// URLs and paths inside this directory [default: refuse them].",
        ),
        ("--media-max-bytes", click.IntRange(min=1), "Size cap of one image or audio clip."),
        ("--media-fetch-timeout", click.FloatRange(min=0, min_open=True), "Seconds per fetch."),
        ("--max-image-pixels", click.IntRange(min=1), "Pixel cap (width x height) of an image."),
    ]
    for flag, kind, help_text in reversed(options):
        default = getattr(DEFAULTS, flag[2:].replace("-", "_"))
        command = click.option(flag, type=kind, default=default, show_default=True, help=help_text)(
            command
        )
    return command


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
    from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model
    from launch.blas import BlasUnavailable, blas_environment
    from launch.warm_prompts import WarmPromptsError, load_warm_prompts

    fields = {
        name: options[name]
        for name in (
            "prefill_step_size", "prefill_interleave", "num_draft_tokens", "quantized_kv_start", "max_kv_size",
            "dtype", "blas", "prefix_cache_bytes", "ssd_cache_dir", "ssd_cache_max_gb",
            "warm_prompts", "reasoning_parser", "tool_call_parser", "vision_cache_entries",
            "talker_max_frames",
        )
    }  # fmt: skip
    fields["kv_bits"] = int(options["kv_bits"]) if options["kv_bits"] else None
    fields["kv_group_size"] = int(options["kv_group_size"])
    for name in ("draft_model", "tts_model", "asr_model"):
        if options[name]:
            try:
                fields[name] = resolve_model(options[name]).path
            except (ModelNotFound, ModelDownloadFailed) as exc:
                flag = "--" + name.replace("_", "-")
                raise click.ClickException(f"{flag}: {exc}") from exc
    try:
        blas_environment(options["blas"], {})
        if options["warm_prompts"]:
            load_warm_prompts(options["warm_prompts"])
    except (BlasUnavailable, WarmPromptsError) as exc:
        raise click.ClickException(str(exc)) from exc
    return fields


@main.command()
@click.argument("model", required=False)
@click.option(
    "--models",
    "models_file",
    type=click.Path(dir_okay=False),
    help="Serve the models of this YAML file, a worker each, loaded on demand (docs/models.md).",
)
@click.option("--host", default=DEFAULTS.host, show_default=True)
@click.option("--port", default=DEFAULTS.port, type=click.IntRange(0, 65535), show_default=True)
@click.option("--api-key", envvar="VOMLX_API_KEY", help="Require this key (env VOMLX_API_KEY).")
@click.option("--served-model-name", help="Model id clients use [default: repo id / dir name].")
@click.option(
    "--max-tokens",
    default=DEFAULTS.max_tokens,
    type=click.IntRange(min=1),
    show_default=True,
    help="Default max_tokens of a request.",
)
@click.option(
    "--max-num-seqs",
    default=DEFAULTS.max_num_seqs,
    type=click.IntRange(min=1),
    show_default=True,
    help="Requests generated at once.",
)
@click.option(
    "--max-queue",
    default=DEFAULTS.max_queue,
    type=click.IntRange(min=0),
    show_default=True,
    help="Requests waiting for a slot; past it: 503.",
)
@click.option(
    "--max-realtime-sessions",
    default=DEFAULTS.max_realtime_sessions,
    type=click.IntRange(min=0),
    show_default=True,
    help="Open /v1/realtime sessions at once; 0: the endpoint is off.",
)
@click.option(
    "--queue-timeout",
    default=DEFAULTS.queue_timeout,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds a request may wait for a slot.",
)
@click.option(
    "--drain-timeout",
    default=DEFAULTS.drain_timeout,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds in-flight requests get to finish (swap, shutdown).",
)
@click.option(
    "--restart-backoff-max",
    default=DEFAULTS.restart_backoff_max,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Longest wait before restarting a crashed worker (the backoff doubles per crash).",
)
@click.option(
    "--max-restarts",
    default=None,
    type=click.IntRange(min=1),
    help="Give up after this many crashes within 120 s [default: never give up].",
)
@click.option(
    "--heartbeat-timeout",
    default=DEFAULTS.heartbeat_timeout,
    type=click.FloatRange(min=0, min_open=True),
    show_default=True,
    help="Worker silence after which it is declared dead.",
)
@click.option(
    "--max-body-mb",
    default=DEFAULTS.max_body_bytes / 2**20,
    type=click.FloatRange(min=0, min_open=True),
    show_default=True,
)
@click.option(
    "--sse-keepalive",
    default=DEFAULTS.sse_keepalive,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds of silence after which a stream writes a keepalive (0: never).",
)
@click.option(
    "--log-level", default=DEFAULTS.log_level, type=click.Choice(LOG_LEVELS), show_default=True
)
@click.option(
    "--log-format",
    default=DEFAULTS.log_format,
    type=click.Choice(LOG_FORMATS),
    show_default=True,
    help="Log lines of the gateway and the worker: text, or one JSON object a line.",
)
@click.option(
    "--log-polls",
    is_flag=True,
    help="Access-log GET /health and /metrics too (left out by default).",
)
@click.option("--omni", is_flag=True, help="MODEL is a speech model (TTS or recognition) alone.")
@click.option(
    "--backend",
    default=DEFAULTS.backend,
    type=click.Choice(["auto", "text", "omni"]),
    show_default=True,
    help="Library for MODEL: auto (from config.json), text (mlx-lm), omni (mlx-vlm).",
)
@click.option(
    "--keys",
    "keys_dir",
    type=click.Path(file_okay=False),
    help="CURVE keys for the models file's remote workers (`keys DIR`: DIR/gateway).",
)
@click.option("--insecure", is_flag=True, help="Remote workers over plain TCP (no CURVE).")
@distributed_options
@alias_options
@embedding_options
@media_options
@generation_options
def serve(model: str | None, **options: Any) -> None:
    """Serve MODEL: a local checkpoint directory or a hub repo id (default: a tiny demo)."""
    import uvicorn

    from gateway.app import create_app
    from gateway.engine.client import WorkerEngineClient
    from gateway.http.request_id import RequestIdLogFilter
    from gateway.realtime.wire import WS_MAX_SIZE

    configure_logging(
        options["log_level"], options["log_format"], "gateway", [RequestIdLogFilter()]
    )
    distributed = distributed_config(options)
    models_file = options.pop("models_file")
    if models_file is not None:
        path, default_name = "", ""
        _check_models_file_flags(model, options)
    else:
        path, default_name = serve_model(model, options)
    config = ServerConfig(
        model=path,
        served_model_name=options["served_model_name"] or default_name,
        host=options["host"],
        port=options["port"],
        api_key=options["api_key"] or None,
        max_tokens=options["max_tokens"],
        max_num_seqs=options["max_num_seqs"],
        max_queue=options["max_queue"],
        max_realtime_sessions=options["max_realtime_sessions"],
        queue_timeout=options["queue_timeout"],
        drain_timeout=options["drain_timeout"],
        heartbeat_timeout=options["heartbeat_timeout"],
        max_restarts=options["max_restarts"],
        restart_backoff_max=options["restart_backoff_max"],
        max_body_bytes=int(options["max_body_mb"] * 2**20),
        sse_keepalive=options["sse_keepalive"],
        log_level=options["log_level"],
        log_format=options["log_format"],
        log_polls=options["log_polls"],
        omni=options["omni"],
        backend=options["backend"],
        keys_dir=os.path.abspath(options["keys_dir"]) if options["keys_dir"] else None,
        insecure=options["insecure"],
        **distributed,
        **alias_config(options),
        **embedding_config(options),
        **media_config(options),
        **generation_config(options),
    )
    engine: Any = WorkerEngineClient(config) if models_file is None else _pool(models_file, config)
    app = create_app(config, engine)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            log_config=None,  # configure_logging's handler writes uvicorn's lines too
            access_log=False,  # gateway/http/access_log.py writes the access log
            lifespan="on",
            # On SIGINT/SIGTERM open requests get the drain timeout, then are cancelled
            # (which aborts them); the lifespan then stops the engine and its worker.
            timeout_graceful_shutdown=config.drain_timeout,
            ws_max_size=WS_MAX_SIZE,  # a realtime audio append may be 15 MiB (OpenAI's limit)
        )
    )
    what = f"the models of {models_file}" if models_file else f"{config.served_model_name} ({path})"
    click.echo(f"Serving {what} on http://{config.host}:{config.port}", err=True)
    server.run()
    if not server.started:
        sys.exit(3)  # uvicorn's own exit status for a failed startup


def _check_models_file_flags(model: str | None, options: dict[str, Any]) -> None:
    """--models names every model (and each one's options): MODEL and the flags that add a
    model to the one worker do not go with it."""
    if model is not None:
        raise click.UsageError("give MODEL or --models FILE, not both")
    for name in ("tts_model", "asr_model", "embedding_model", "rerank_model", "draft_model"):
        if options.get(name):
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} does not go with --models: list it in the file")


def _pool(models_file: str, config: ServerConfig) -> Any:
    from gateway.pool.models_file import ModelsFileError, load_models_file
    from gateway.pool.pool import ModelPool, resolve_paths

    try:
        models = load_models_file(models_file)
        _check_remote_security(models, config)
        return ModelPool(models, config, resolve_paths(models, lambda p: resolve(p)[0]))
    except (ModelsFileError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _check_remote_security(models: Any, config: ServerConfig) -> None:
    """Remote workers need the CURVE keys (--keys DIR), or --insecure for plain TCP."""
    from gateway.engine.worker_channel import CurveClientKeys

    remote = [spec.id for spec in models.models if spec.remote]
    if config.keys_dir and config.insecure:
        raise click.UsageError("--keys and --insecure do not go together")
    if not remote:
        return
    if config.keys_dir:
        CurveClientKeys.load(config.keys_dir)  # KeysError (a ValueError) names the file
    elif not config.insecure:
        raise click.ClickException(
            f"model {remote[0]!r} is remote: give --keys DIR (CURVE keys, made by "
            "`vllm-omni-mlx keys DIR`) or --insecure for plain TCP"
        )


def _call(method: str, url: str, api_key: str | None, timeout: float | None, **kw: Any) -> Any:
    """One admin call; prints the server's error and exits non-zero on failure."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.request(
            method, url, headers=headers, timeout=httpx.Timeout(timeout, connect=10.0), **kw
        )
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_error:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        raise click.ClickException(f"HTTP {response.status_code}: {message or response.text}")
    return body


url_option = click.option(
    "--url", default=DEFAULT_URL, show_default=True, help="Base URL of the running server."
)
api_key_option = click.option("--api-key", envvar="VOMLX_API_KEY", help="Env VOMLX_API_KEY.")


@main.group()
def models() -> None:
    """Manage the model a running server serves."""


@models.command("load")
@click.argument("model")
@click.option("--served-model-name", help="Model id clients use [default: repo id / dir name].")
@url_option
@api_key_option
def load(model: str, served_model_name: str | None, url: str, api_key: str | None) -> None:
    """Swap the running server to MODEL (a directory or hub repo id, as the server sees it);
    with --models FILE, load that file's model MODEL (an id or alias)."""
    payload: dict[str, str] = {"model": model}
    if served_model_name:
        payload["served_model_name"] = served_model_name
    # A swap drains requests and loads weights (maybe a download): no read timeout.
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/load", api_key, None, json=payload)
    click.echo(json.dumps(result, indent=2))


@models.command("unload")
@click.argument("model")
@url_option
@api_key_option
def unload(model: str, url: str, api_key: str | None) -> None:
    """Unload MODEL of a server started with --models FILE (its worker stops)."""
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/unload", api_key, 60.0,
                   json={"model": model})  # fmt: skip
    click.echo(json.dumps(result, indent=2))


@models.command("pin")
@click.argument("model")
@click.option("--unpin", is_flag=True, help="Let the model be evicted again.")
@url_option
@api_key_option
def pin(model: str, unpin: bool, url: str, api_key: str | None) -> None:
    """Pin MODEL of a server started with --models FILE: it is never evicted."""
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/pin", api_key, 30.0,
                   json={"model": model, "pinned": not unpin})  # fmt: skip
    click.echo(json.dumps(result, indent=2))


@main.command()
@url_option
@api_key_option
def stats(url: str, api_key: str | None) -> None:
    """Print the worker's statistics."""
    result = _call("GET", url.rstrip("/") + "/v1/admin/stats", api_key, 30.0)
    click.echo(json.dumps(result, indent=2))


@main.command()
@bench_options
def bench(**options: Any) -> None:
    """Measure a running OpenAI-compatible server: TTFT, inter-token latency, tok/s."""
    from bench.command import run

    run(**options)


main.add_command(tts)  # speech synthesis without a server (gateway/cli/speech.py)
main.add_command(convert_command)  # GGUF / CTranslate2 -> MLX checkpoints (convert/cli.py)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", required=True, help="Speech-recognition model: directory or hub id.")
@click.option("--language", help="ISO-639-1 code of the speech [default: detect].")
@click.option("--prompt", help="Context / initial prompt.")
@click.option("--temperature", type=click.FloatRange(0, 1), help="[default: fallback ladder]")
@click.option("--task", type=click.Choice(["transcribe", "translate"]), default="transcribe")
@click.option(
    "--format", type=click.Choice(["json", "text", "srt", "verbose_json", "vtt"]), default="text"
)
@click.option("--word-timestamps", is_flag=True, help="Words in verbose_json.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write here [default: stdout].")
def transcribe(file: str, model: str, **options: Any) -> None:
    """Transcribe (or translate) FILE with a speech-recognition MODEL, no server needed."""
    from gateway.audio.transcription.formats import Transcript, render
    from protocol import decode
    from protocol.messages import Step, Usage

    # The work runs in a worker subprocess: this process, like the gateway, never imports MLX.
    # It answers with its deltas as one protocol Step, rendered here as the server would.
    fmt, words, out = options.pop("format"), options["word_timestamps"], options.pop("out")
    argv = [sys.executable, "-m", "worker.oneshot.transcribe", file]
    argv += ["--model", resolve(model)[0]]
    for name, value in options.items():
        if value not in (None, False):
            flag = "--" + name.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
    done = subprocess.run(argv, stdout=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit(done.returncode)  # the worker said why on stderr
    step = decode(done.stdout)
    assert isinstance(step, Step)
    terminal = step.deltas[-1]
    usage = terminal.usage or Usage(0, 0)
    transcript = Transcript(
        text="".join(d.text for d in step.deltas),
        task=options["task"],
        language=terminal.language or options["language"] or "",
        segments=terminal.segments,
        usage=usage,
        duration=float(usage.prompt_tokens),
    )
    body = render(fmt, transcript, words)
    output = (
        json.dumps(body, ensure_ascii=False, indent=2) + "\n" if isinstance(body, dict) else body
    )
    if out:
        Path(out).write_text(output, encoding="utf-8")
    else:
        sys.stdout.write(output)


# `worker --listen` and `keys` (workers on other hosts); imported last: they use this module's
# options and register themselves on `main`.
import gateway.cli.remote  # noqa: E402, F401
