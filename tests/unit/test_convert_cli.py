"""`vllm-omni-mlx convert SRC OUT`: picks the converter, writes OUT whole or not at all."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gateway.cli.main import main
from tests.support.ct2_source import write_tiny_whisper
from tests.support.gguf_source import TinyModel, write_tiny_gguf


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path, TinyModel())
    return path


def test_the_command_is_listed_in_the_cli_help():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "convert" in result.output


def test_a_gguf_file_becomes_an_mlx_lm_checkpoint(gguf_file, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(gguf_file), str(out)])
    assert result.exit_code == 0, result.output
    assert "gguf" in result.output and "q/k rows un-permuted" in result.output
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "generation_config.json" in names
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "float32"


def test_a_ctranslate2_whisper_directory_becomes_the_hugging_face_layout(tmp_path):
    write_tiny_whisper(tmp_path / "ct2", parts=2)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "ct2"), str(out)])
    assert result.exit_code == 0, result.output
    assert "ct2-whisper" in result.output and "from 2 file(s)" in result.output
    assert json.loads((out / "config.json").read_text())["model_type"] == "whisper"
    assert (out / "preprocessor_config.json").is_file()


def test_an_existing_out_is_kept_unless_forced(gguf_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["convert", str(gguf_file), str(out)])
    assert result.exit_code != 0 and "exists" in result.output
    assert (out / "mine.txt").read_text() == "keep me"
    result = CliRunner().invoke(main, ["convert", str(gguf_file), str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert not (out / "mine.txt").exists() and (out / "config.json").is_file()


def test_an_unconvertible_source_fails_with_the_reason_and_leaves_nothing(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("hello")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(src), str(out)])
    assert result.exit_code == 1
    assert "neither a GGUF file nor a CTranslate2 model.bin" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_dtype_is_passed_to_the_converter(gguf_file, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(gguf_file), str(out), "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
