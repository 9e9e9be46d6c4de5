"""Turn what a user typed as MODEL into a local checkpoint directory and a default served name.

A local directory wins; anything else that is a valid hub repo id is fetched with
`huggingface_hub.snapshot_download` (a cache hit when already downloaded; a progress bar
otherwise). Only huggingface_hub is used: the gateway never imports transformers or mlx.
Blocking: call it from a thread inside the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from huggingface_hub import errors as hub_errors

WEIGHT_SUFFIXES = (".safetensors", ".npz")


def checkpoint_problem(path: str) -> str | None:
    """What keeps the directory `path` from being a checkpoint (its config.json and its
    weights, `*.safetensors` or `*.npz`, as mlx-lm, mlx-vlm and mlx-audio save them; or, an
    image-generation pipeline, its model_index.json and components, each a folder of its own
    config and weights, as diffusers lays them out; or mlx-vlm's converted MiniMax-H3 video
    pipeline, its h3_manifest.json and components alike), or None."""
    if not os.path.isdir(path):
        return f"{path} is not a directory"
    for index in ("model_index.json", "h3_manifest.json"):
        if os.path.isfile(os.path.join(path, index)):
            return _pipeline_problem(path, index)
    if not os.path.isfile(os.path.join(path, "config.json")):
        return f"{path} has no config.json: not a model checkpoint"
    if not any(name.endswith(WEIGHT_SUFFIXES) for name in os.listdir(path)):
        return f"{path} has no weights (*.safetensors): not a complete model checkpoint"
    return None


def _pipeline_problem(path: str, index: str) -> str | None:
    parts = [
        name
        for name in os.listdir(path)
        if os.path.isdir(os.path.join(path, name))
        and any(f.endswith(WEIGHT_SUFFIXES) for f in os.listdir(os.path.join(path, name)))
    ]
    if not parts:
        return f"{path} has a {index} but no component with weights (*.safetensors)"
    return None


class ModelNotFound(ValueError):
    """MODEL is neither a local directory nor an existing hub repository."""


class ModelDownloadFailed(RuntimeError):
    """MODEL looks like a hub repo id but could not be fetched (offline, hub error)."""


@dataclass(frozen=True, slots=True)
class LocatedCheckpoint:
    path: str  # absolute local checkpoint directory
    name: str  # default served name: the repo id, or the directory's basename


def locate_checkpoint(
    model: str, *, download: Callable[..., str] | None = None
) -> LocatedCheckpoint:
    path = os.path.expanduser(model)
    if os.path.isdir(path):
        path = os.path.abspath(path)
        return LocatedCheckpoint(path, os.path.basename(path))
    if model.startswith(("/", ".", "~")) or os.path.exists(path):
        raise ModelNotFound(f"{model}: not a checkpoint directory")
    try:
        from huggingface_hub.utils import validate_repo_id

        validate_repo_id(model)
    except hub_errors.HFValidationError:
        raise ModelNotFound(f"{model}: neither a local directory nor a valid hub repo id") from None
    if download is None:
        from huggingface_hub import snapshot_download

        download = snapshot_download
    try:
        return LocatedCheckpoint(str(download(repo_id=model)), model)
    except hub_errors.GatedRepoError as exc:
        raise ModelDownloadFailed(f"{model}: gated repository, log in first ({exc})") from exc
    except hub_errors.RepositoryNotFoundError as exc:
        raise ModelNotFound(f"{model}: no such repository on the hub") from exc
    except hub_errors.LocalEntryNotFoundError as exc:
        raise ModelDownloadFailed(
            f"cannot download {model}: the hub is unreachable (offline?) and it is not in the "
            "local cache; pass a local checkpoint directory instead"
        ) from exc
    except (hub_errors.HfHubHTTPError, OSError) as exc:
        raise ModelDownloadFailed(f"cannot download {model}: {exc}") from exc
