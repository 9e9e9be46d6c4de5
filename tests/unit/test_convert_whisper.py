"""CTranslate2 Whisper -> Hugging Face layout: mlx-audio loads it and computes what CT2 would.

Tiny CTranslate2 Whisper directories are written in the test (tests/support/ct2_source.py,
with a model.bin writer of its own): fused projections, zero key biases, float16 weights, a
tokenizer.json without timestamp tokens. The converted checkpoint is loaded by mlx-audio's
own loader; its weights are the source tensors, its encoder and decoder outputs match a numpy
Whisper run on the CTranslate2 variables within ATOL, and its tokenizer has the timestamps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.ct2_source import (
    ALIASES,
    TIMESTAMPS,
    decoder_reference,
    encoder_reference,
    model_bin_bytes,
    sinusoids,
    whisper_variables,
    write_model_bin,
    write_tiny_whisper,
)
from worker.convert.ct2_format import read_model_bin
from worker.convert.errors import ConversionError
from worker.convert.from_ct2 import convert_ct2_whisper, model_bin_parts

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# mlx-audio in float32 against float64 numpy, same float16 weights on both sides; measured
# max abs differences: encoder 1.2e-6, logits 3.6e-6 (logits up to ~13).
ATOL = 1e-4


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("ct2")
    source = write_tiny_whisper(root / "src")
    out = root / "hf"
    out.mkdir()
    convert_ct2_whisper(root / "src", out)
    return {**source, "src": root / "src", "out": out}


def _float32_model(out: Path):
    """mlx-audio's Whisper in float32 (its loader casts to float16) with the converted weights."""
    import mlx.core as mx
    from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions

    config = json.loads((out / "config.json").read_text())
    model = Model(ModelDimensions.from_dict(config), dtype=mx.float32)
    weights = model.sanitize(mx.load(str(out / "model.safetensors")))
    model.load_weights(list(weights.items()), strict=True)
    return model


@pytest.mark.parametrize("version", [6, 3])
def test_the_reader_reads_back_what_the_writer_wrote(tmp_path, version):
    variables = {
        "a/weight": np.arange(12, dtype=np.float32).reshape(3, 4),
        "a/weight_scale": np.array([1.0, 2.0, 4.0], dtype=np.float32),
        "b/flag": np.array(1, dtype=np.int8),
        "b/count": np.array(-7, dtype=np.int16),
        "c/q": np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
    }
    if version >= 4:
        variables["d/half"] = np.linspace(-1, 1, 5).astype(np.float16)
    (path,) = write_model_bin(
        tmp_path, model_bin_bytes("TestSpec", variables, {"x": "a/weight"}, 2, version)
    )
    model = read_model_bin(path)
    assert (model.binary_version, model.spec, model.revision) == (version, "TestSpec", 2)
    assert model.aliases == {"x": "a/weight"}
    assert set(model.variables) == set(variables)
    for name, value in variables.items():
        assert model.variables[name].dtype == value.dtype
        np.testing.assert_array_equal(model.variables[name], value)
    assert model.scalar("b/count") == -7
    np.testing.assert_array_equal(model.get("x"), variables["a/weight"])


def test_a_model_bin_split_into_parts_reads_as_the_whole(tmp_path):
    variables = whisper_variables(write_tiny_whisper(tmp_path / "w")["spec"], 2000)
    data = model_bin_bytes("WhisperSpec", variables, ALIASES)
    whole = read_model_bin(write_model_bin(tmp_path / "whole", data))
    parts = write_model_bin(tmp_path / "parts", data, parts=3)
    assert model_bin_parts(tmp_path / "parts") == parts
    split = read_model_bin(parts)
    assert split.aliases == whole.aliases and set(split.variables) == set(whole.variables)
    for name, value in whole.variables.items():
        np.testing.assert_array_equal(split.variables[name], value)


def test_a_truncated_or_overlong_model_bin_is_a_conversion_error(tmp_path):
    data = model_bin_bytes("WhisperSpec", {"a": np.zeros(4, dtype=np.float32)})
    (tmp_path / "short.bin").write_bytes(data[:-3])
    with pytest.raises(ConversionError, match="ends early"):
        read_model_bin(tmp_path / "short.bin")
    (tmp_path / "long.bin").write_bytes(data + b"\0")
    with pytest.raises(ConversionError, match="past its end"):
        read_model_bin(tmp_path / "long.bin")


def test_mlx_audio_loads_it_and_its_weights_are_the_source_tensors(whisper):
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_audio.stt.utils import load_model

    model = load_model(str(whisper["out"]), strict=True)
    assert type(model).__module__ == "mlx_audio.stt.models.whisper.whisper"
    params = dict(tree_flatten(model.parameters()))
    v, d = whisper["variables"], whisper["spec"].d_model
    fused = v["decoder/layer_1/self_attention/linear_0/weight"]
    cross = v["decoder/layer_1/attention/linear_1/weight"]
    expected = {
        "encoder.conv1.weight": v["encoder/conv1/weight"].transpose(0, 2, 1),
        "encoder.blocks.0.attn.query.weight": v["encoder/layer_0/self_attention/linear_0/weight"][
            :d
        ],
        "encoder.blocks.1.attn_ln.bias": v["encoder/layer_1/self_attention/layer_norm/beta"],
        "encoder.ln_post.weight": v["encoder/layer_norm/gamma"],
        "decoder.token_embedding.weight": v["decoder/embeddings/weight"],
        "decoder.positional_embedding": v["decoder/position_encodings/encodings"],
        "decoder.blocks.1.attn.key.weight": fused[d : 2 * d],
        "decoder.blocks.1.attn.value.weight": fused[2 * d :],
        "decoder.blocks.1.attn.value.bias": v["decoder/layer_1/self_attention/linear_0/bias"][
            2 * d :
        ],
        "decoder.blocks.1.cross_attn.key.weight": cross[:d],
        "decoder.blocks.1.cross_attn.value.weight": cross[d:],
        "decoder.blocks.1.cross_attn.out.weight": v["decoder/layer_1/attention/linear_2/weight"],
        "decoder.blocks.0.mlp2.bias": v["decoder/layer_0/ffn/linear_1/bias"],
        "decoder.ln.weight": v["decoder/layer_norm/gamma"],
    }
    for name, value in expected.items():
        assert params[name].dtype == mx.float16
        np.testing.assert_array_equal(np.array(params[name]), value, err_msg=name)
    # strict=True: every parameter came from the file, and the file has nothing else (but the
    # encoder positions, which mlx-audio computes); Whisper's keys have no bias.
    names = mx.load(str(whisper["out"] / "model.safetensors")).keys()
    assert not [n for n in names if "k_proj.bias" in n]


def test_its_encoder_and_decoder_match_a_numpy_whisper_forward(whisper):
    import mlx.core as mx

    spec = whisper["spec"]
    model = _float32_model(whisper["out"])
    mel = np.random.default_rng(1).standard_normal((2 * spec.n_audio_ctx, spec.n_mels))
    audio = np.array(model.embed_audio(mx.array(mel[None], dtype=mx.float32))[0])
    # mlx-audio computes the encoder's sinusoid positions itself (in float32) instead of
    # reading them: the reference does the same, after checking that the file holds them.
    variables = dict(whisper["variables"])
    exact = sinusoids(spec.n_audio_ctx, spec.d_model)
    stored = variables["encoder/position_encodings/encodings"]
    np.testing.assert_allclose(stored, exact, atol=1e-3)
    variables["encoder/position_encodings/encodings"] = exact
    audio_ref = encoder_reference(variables, mel)
    assert np.abs(audio - audio_ref).max() <= ATOL
    tokens = whisper["tokenizer"].encode(" the lazy dog", add_special_tokens=True).ids[:-1]
    logits = np.array(model.logits(mx.array([tokens]), mx.array(audio[None]))[0])
    logits_ref = decoder_reference(variables, tokens, audio_ref)
    assert logits.shape == logits_ref.shape
    assert np.abs(logits - logits_ref).max() <= ATOL


def test_the_tokenizer_gains_the_1501_timestamp_tokens_after_notimestamps(whisper):
    from mlx_audio.stt.utils import load_model
    from tokenizers import Tokenizer

    source = whisper["tokenizer"]
    assert source.token_to_id("<|0.00|>") is None
    tok = Tokenizer.from_file(str(whisper["out"] / "tokenizer.json"))
    first = source.token_to_id("<|notimestamps|>") + 1
    assert tok.token_to_id("<|0.00|>") == first
    assert tok.token_to_id("<|0.02|>") == first + 1
    assert tok.token_to_id("<|30.00|>") == first + TIMESTAMPS - 1
    rows = whisper["variables"]["decoder/embeddings/weight"].shape[0]
    assert tok.get_vocab_size() == rows
    model = load_model(str(whisper["out"]))
    tokenizer = model.get_tokenizer()
    assert tokenizer.timestamp_begin == first
    stamps = tokenizer.hf_tokenizer.convert_ids_to_tokens([first, first + 50])
    assert stamps == ["<|0.00|>", "<|1.00|>"]
    text = tokenizer.encode(" the quick brown fox")
    assert tokenizer.decode(text) == " the quick brown fox"


def test_the_config_files_describe_the_model(whisper):
    out, spec = whisper["out"], whisper["spec"]
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "whisper"
    assert (config["d_model"], config["encoder_layers"], config["decoder_layers"]) == (
        spec.d_model,
        spec.encoder_layers,
        spec.decoder_layers,
    )
    assert config["max_source_positions"] == spec.n_audio_ctx
    assert config["num_mel_bins"] == spec.n_mels and config["torch_dtype"] == "float16"
    assert config["suppress_tokens"] == [1, 2, 3]
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["alignment_heads"] == [[1, 0], [1, 1]]
    assert generation["is_multilingual"] is False and "lang_to_id" not in generation
    preprocessor = json.loads((out / "preprocessor_config.json").read_text())
    assert preprocessor["feature_size"] == spec.n_mels


def test_a_split_model_bin_converts_like_the_whole(whisper, tmp_path):
    from safetensors.numpy import load_file

    source = write_tiny_whisper(tmp_path / "split", parts=2)
    assert [p.name for p in source["parts"]] == ["model.bin.part1", "model.bin.part2"]
    # The second part may also live elsewhere (another package): --part / extra_parts.
    moved = tmp_path / "elsewhere" / "model.bin.part2"
    moved.parent.mkdir()
    source["parts"][1].rename(moved)
    out = tmp_path / "out"
    out.mkdir()
    convert_ct2_whisper(tmp_path / "split", out, extra_parts=[moved])
    got = load_file(str(out / "model.safetensors"))
    want = load_file(str(whisper["out"] / "model.safetensors"))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_int8_weights_are_dequantized_with_their_scale(tmp_path):
    from safetensors.numpy import load_file

    source = write_tiny_whisper(tmp_path / "src")
    variables = dict(source["variables"])
    name = "decoder/layer_0/ffn/linear_0/weight"
    original = variables[name].astype(np.float32)
    scale = 127 / np.abs(original).max(axis=1)
    variables[name] = np.round(original * scale[:, None]).astype(np.int8)
    variables[name + "_scale"] = scale.astype(np.float32)
    write_model_bin(tmp_path / "src", model_bin_bytes("WhisperSpec", variables, ALIASES))
    out = tmp_path / "out"
    out.mkdir()
    convert_ct2_whisper(tmp_path / "src", out, dtype="float32")
    got = load_file(str(out / "model.safetensors"))["model.decoder.layers.0.fc1.weight"]
    np.testing.assert_allclose(got, variables[name] / scale[:, None], rtol=1e-6)
    assert np.abs(got - original).max() <= np.abs(original).max() / 127


def test_a_variable_with_no_hugging_face_counterpart_is_a_conversion_error(tmp_path):
    source = write_tiny_whisper(tmp_path / "src")
    variables = {**source["variables"], "decoder/something_new": np.zeros(3, np.float16)}
    write_model_bin(tmp_path / "src", model_bin_bytes("WhisperSpec", variables, ALIASES))
    with pytest.raises(ConversionError, match="decoder/something_new"):
        convert_ct2_whisper(tmp_path / "src", tmp_path)


def test_a_tokenizer_that_does_not_fit_the_model_is_a_conversion_error(tmp_path):
    source = write_tiny_whisper(tmp_path / "src")
    variables = dict(source["variables"])
    rows = variables["decoder/embeddings/weight"]
    variables["decoder/embeddings/weight"] = np.concatenate([rows, rows[:1]])
    write_model_bin(tmp_path / "src", model_bin_bytes("WhisperSpec", variables, ALIASES))
    with pytest.raises(ConversionError, match="tokens, the model"):
        convert_ct2_whisper(tmp_path / "src", tmp_path)


def test_a_model_bin_of_another_spec_is_a_conversion_error(tmp_path):
    write_model_bin(tmp_path, model_bin_bytes("TransformerSpec", {}))
    with pytest.raises(ConversionError, match="not a WhisperSpec"):
        convert_ct2_whisper(tmp_path, tmp_path)
