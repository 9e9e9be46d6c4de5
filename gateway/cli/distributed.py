"""`serve --ranks N` / `--distributed HOSTFILE`: one model split across an MLX distributed
group (docs/distributed.md), and the flags that cannot go with it."""

from __future__ import annotations

import json
from typing import Any

import click

from protocol.launch.parallel_modes import PARALLEL_MODES

BACKENDS = ("ring", "jaccl", "jaccl-ring", "mpi", "nccl")
# Flags a distributed worker refuses: the group serves one mlx-lm text model and nothing next
# to it (every rank would load the other models too, and their work is not in lockstep).
REFUSED = {
    "speech_model": "--speech-model",
    "transcription_model": "--transcription-model",
    "embedding_model": "--embedding-model",
    "rerank_model": "--rerank-model",
    "image_model": "--image-model",
    "video_model": "--video-model",
    "draft_model": "--draft-model",
    "adapter_path": "--adapter-path",
    "lora_modules": "--lora-modules",
    "ssd_cache_dir": "--ssd-cache-dir",
    # The ranks must choose the same prefill chunks; pacing follows each rank's clock.
    "prefill_interleave": "--prefill-interleave (other than 0)",
    "models_file": "--models",
}


def distributed_options(command: Any) -> Any:
    options = [
        click.option(
            "--distributed",
            "distributed_hostfile",
            type=click.Path(exists=True, dir_okay=False),
            help="Split MODEL across the hosts of this mlx.launch hostfile (this host first).",
        ),
        click.option(
            "--ranks",
            type=click.IntRange(min=2),
            help="Ranks on this host (with --distributed: ranks per host).",
        ),
        click.option(
            "--parallel",
            type=click.Choice(PARALLEL_MODES),
            default="auto",
            show_default=True,
            help="How a distributed MODEL is split (auto: tensor where mlx-lm has it).",
        ),
        click.option(
            "--distributed-backend",
            type=click.Choice(BACKENDS),
            help="MLX's backend [default: the hostfile's, else nccl on CUDA, else ring].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def distributed_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's distributed fields; a UsageError for what cannot go with them."""
    hostfile, ranks = options.pop("distributed_hostfile"), options.pop("ranks")
    parallel, backend = options.pop("parallel"), options.pop("distributed_backend")
    if hostfile is None and ranks is None:
        for name, value in (("--parallel", parallel != "auto"), ("--distributed-backend", backend)):
            if value:
                raise click.UsageError(f"{name} needs --ranks N or --distributed HOSTFILE")
        return {}
    for name, flag in REFUSED.items():
        if options.get(name):
            raise click.UsageError(f"{flag} does not go with a distributed model")
    if options.get("speculative") not in (None, "none", "auto"):  # auto: none in a group
        raise click.UsageError(
            f"--speculative {options['speculative']} does not go with a distributed model "
            "(its ranks would have to verify proposals in lockstep)"
        )
    if options.get("omni") or options.get("backend") == "omni":
        raise click.UsageError("a distributed model is an mlx-lm text model (not --omni)")
    if hostfile is not None:
        check_hostfile(hostfile)
    return {
        "distributed_hostfile": hostfile,
        "ranks": ranks,
        "parallel": parallel,
        "distributed_backend": backend,
    }


def check_hostfile(path: str) -> None:
    """An mlx.launch hostfile: a JSON list of hosts, each with "ssh" (and "ips" for ring)."""
    try:
        data = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        raise click.UsageError(f"--distributed {path}: not a JSON hostfile ({exc})") from None
    hosts = data.get("hosts") if isinstance(data, dict) else data
    if not isinstance(hosts, list) or not hosts:
        raise click.UsageError(f'--distributed {path}: no hosts (a JSON list of {{"ssh": ...}})')
    for i, host in enumerate(hosts):
        if not isinstance(host, dict) or not isinstance(host.get("ssh"), str):
            raise click.UsageError(f'--distributed {path}: host {i} has no "ssh" name')
