"""`vllm-omni-mlx convert SRC OUT`: picks the converter, writes OUT whole or not at all."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

import pytest

from tests.support.ct2_source import write_tiny_whisper
from tests.support.gguf_source import TinyModel, write_tiny_gguf
from tests.support.server import CLI


@dataclass
class Result:
    exit_code: int
    output: str  # stdout and stderr


def _run(*args: str) -> Result:
    """The real command, as a user runs it (the conversion itself runs in a process of its
    own, `python -m worker.convert`)."""
    done = subprocess.run([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return Result(done.returncode, done.stdout)


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path, TinyModel())
    return path


def test_the_command_is_listed_in_the_cli_help():
    result = _run(*["--help"])
    assert result.exit_code == 0 and "convert" in result.output


def test_a_gguf_file_becomes_an_mlx_lm_checkpoint(gguf_file, tmp_path):
    out = tmp_path / "out"
    result = _run(*["convert", str(gguf_file), str(out)])
    assert result.exit_code == 0, result.output
    assert "gguf" in result.output and "q/k rows un-permuted" in result.output
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "generation_config.json" in names
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "float32"


def test_a_ctranslate2_whisper_directory_becomes_the_hugging_face_layout(tmp_path):
    write_tiny_whisper(tmp_path / "ct2", parts=2)
    out = tmp_path / "out"
    result = _run(*["convert", str(tmp_path / "ct2"), str(out)])
    assert result.exit_code == 0, result.output
    assert "ct2-whisper" in result.output and "from 2 file(s)" in result.output
    assert json.loads((out / "config.json").read_text())["model_type"] == "whisper"
    assert (out / "preprocessor_config.json").is_file()


def test_an_existing_out_is_kept_unless_forced(gguf_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    result = _run(*["convert", str(gguf_file), str(out)])
    assert result.exit_code != 0 and "exists" in result.output
    assert (out / "mine.txt").read_text() == "keep me"
    result = _run(*["convert", str(gguf_file), str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert not (out / "mine.txt").exists() and (out / "config.json").is_file()


def test_an_unconvertible_source_fails_with_the_reason_and_leaves_nothing(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("hello")
    out = tmp_path / "out"
    result = _run(*["convert", str(src), str(out)])
    assert result.exit_code == 1
    assert "not a GGUF file, a CTranslate2 model.bin or a Kokoro ONNX export" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_dtype_is_passed_to_the_converter(gguf_file, tmp_path):
    out = tmp_path / "out"
    result = _run(*["convert", str(gguf_file), str(out), "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"


def test_a_kokoro_onnx_export_needs_its_vocabulary_and_voices(tmp_path, gguf_file):
    src = tmp_path / "kokoro.onnx"
    src.write_bytes(b"not read before the options are checked")
    result = _run(*["convert", str(src), str(tmp_path / "out")])
    assert result.exit_code == 1 and "--vocab" in result.output and "--voices" in result.output
    vocab = tmp_path / "vocab.json"
    vocab.write_text("{}")
    result = _run(*["convert", str(gguf_file), str(tmp_path / "o2"),
                                       "--vocab", str(vocab)])  # fmt: skip
    assert result.exit_code == 1 and "for a Kokoro ONNX export" in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "o2").exists()
