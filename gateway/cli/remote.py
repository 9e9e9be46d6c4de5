"""Workers on other hosts: `vllm-omni-mlx worker --listen tcp://HOST:PORT MODEL` and
`vllm-omni-mlx keys DIR` (docs/models.md, "Workers on other hosts").

`worker` is a thin launcher: it resolves MODEL and checks the flags as `serve` does, builds
the worker's flags and environment as the gateway would for a local worker, then replaces
itself (exec) with the worker host, `python -m worker.host` (worker/host/host.py), which
imports neither the gateway nor MLX and runs `python -m worker` as its child.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from gateway.cli.embeddings import embedding_config, embedding_options
from gateway.cli.images import image_config, image_options
from gateway.cli.model_source import resolve
from gateway.cli.serve_options import DEFAULTS, LOG_LEVELS, generation_config, generation_options
from gateway.config import ServerConfig
from protocol.endpoints import BadAddress, parse_tcp
from protocol.launch import curve_keys
from protocol.launch.python import python_module
from protocol.log_format import LOG_FORMATS


@click.command("worker")
@click.argument("model")
@click.option("--listen", required=True, help="tcp://HOST:PORT to bind (PORT + 1 too).")
@click.option(
    "--keys",
    type=click.Path(file_okay=False),
    help="CURVE keys of this host (`vllm-omni-mlx keys DIR`: DIR/host).",
)
@click.option("--insecure", is_flag=True, help="Plain TCP: no encryption, no authentication.")
@click.option(
    "--max-num-seqs",
    default=DEFAULTS.max_num_seqs,
    type=click.IntRange(min=1),
    show_default=True,
    help="Requests generated at once.",
)
@click.option("--adapter", help="An mlx-lm LoRA adapter directory applied to MODEL.")
@click.option("--omni", is_flag=True, help="MODEL is a speech model (TTS or recognition) alone.")
@click.option(
    "--backend",
    default=DEFAULTS.backend,
    type=click.Choice(["auto", "text", "omni"]),
    show_default=True,
)
@click.option(
    "--restart-backoff-max",
    default=DEFAULTS.restart_backoff_max,
    type=click.FloatRange(min=0),
    show_default=True,
    help="Longest wait before restarting a crashed worker.",
)
@click.option(
    "--log-level", default=DEFAULTS.log_level, type=click.Choice(LOG_LEVELS), show_default=True
)
@click.option(
    "--log-format", default=DEFAULTS.log_format, type=click.Choice(LOG_FORMATS), show_default=True
)
@embedding_options
@image_options
@generation_options
def worker_command(model: str, **options: Any) -> None:
    """Serve MODEL to a gateway on another host: a supervised worker behind tcp://HOST:PORT.

    The gateway lists it in its models file as `remote: tcp://HOST:PORT`."""
    from gateway.workers.worker_process import worker_arguments, worker_env

    listen, keys, insecure = options["listen"], options["keys"], options["insecure"]
    try:
        parse_tcp(listen)
    except BadAddress as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    if keys and insecure:
        raise click.UsageError("--keys and --insecure do not go together")
    if not keys and not insecure:
        raise click.UsageError(
            "give --keys DIR (CURVE: `vllm-omni-mlx keys DIR` makes them) or --insecure "
            "(plain TCP, anyone who reaches the port may use the model)"
        )
    if keys:
        try:
            curve_keys.host_keys(keys)
        except curve_keys.KeysError as exc:
            raise click.ClickException(str(exc)) from None
    path, name = resolve(model)
    config = ServerConfig(
        model=path,
        served_model_name=name,
        max_num_seqs=options["max_num_seqs"],
        log_level=options["log_level"],
        log_format=options["log_format"],
        omni=options["omni"],
        backend=options["backend"],
        adapter_path=options["adapter"],
        **embedding_config(options),
        **image_config(options),
        **generation_config(options),
    )
    argv = [*python_module("worker.host"), "--listen", listen]
    argv += ["--keys", os.path.abspath(keys)] if keys else ["--insecure"]
    argv += ["--restart-backoff-max", str(options["restart_backoff_max"])]
    argv += ["--log-level", config.log_level, "--log-format", config.log_format]
    argv += ["--", *worker_arguments(config, path)]
    click.echo(f"Serving {name} ({path}) to gateways on {listen}", err=True)
    sys.stderr.flush()
    os.execve(sys.executable, argv, worker_env(path, config))


@click.command("keys")
@click.argument("directory", type=click.Path(file_okay=False))
def keys_command(directory: str) -> None:
    """Make the CURVE key pairs of a gateway and a worker host in DIRECTORY.

    DIRECTORY/host goes to the worker's machine (`worker --keys DIRECTORY/host`),
    DIRECTORY/gateway stays with the gateway (`serve --keys DIRECTORY/gateway`)."""
    import zmq.auth

    root = Path(directory)
    gateway, host = root / curve_keys.GATEWAY_DIR, root / curve_keys.HOST_DIR
    for existing in (gateway / curve_keys.CLIENT_SECRET, host / curve_keys.SERVER_SECRET):
        if existing.exists():
            raise click.ClickException(f"{existing} exists already: keys are never overwritten")
    clients = host / curve_keys.CLIENTS_DIR
    for folder in (gateway, host, clients):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
    client_public, client_secret = zmq.auth.create_certificates(str(gateway), "client")
    server_public, server_secret = zmq.auth.create_certificates(str(host), "server")
    for secret in (client_secret, server_secret):
        os.chmod(secret, 0o600)
    shutil.copyfile(server_public, gateway / curve_keys.SERVER_PUBLIC)
    shutil.copyfile(client_public, clients / "client.key")
    click.echo(
        f"Made {gateway} (serve --keys {gateway}) and {host} (worker --keys {host}; "
        "copy it to the worker's machine)"
    )
