"""GGUF -> MLX conversion: the converted checkpoint computes what the GGUF file computes.

Tiny GGUF files are written in the test (tests/support/gguf_source.py) with tensors in every
block format the tests cover, q/k rows permuted as llama.cpp permutes them, and a small
byte-level BPE with special tokens. The converted checkpoint is loaded with `mlx_lm.load`
and its logits compared with a float64 numpy forward pass of the GGUF tensors as llama.cpp
runs them (pair-wise RoPE on the permuted rows): they agree within LOGITS_ATOL only if the
permutation was undone and every tensor dequantized and renamed right.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.gguf_source import (
    SPECIAL_TOKENS,
    TinyModel,
    llama_cpp_permute,
    read_source,
    reference_logits,
    write_tiny_gguf,
)
from worker.convert import gguf_tensors
from worker.convert.errors import ConversionError
from worker.convert.from_gguf import convert_gguf

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# float32 MLX against float64 numpy on logits of magnitude up to ~25: measured max abs
# differences 1.9e-6 (llama-untied), 1.1e-5 (llama-tied), 8.3e-6 (qwen2), 1.0e-5 (llama3).
LOGITS_ATOL = 1e-4
PROMPT = "The capital of France is Paris. 2024: <|im_start|>déjà vu 🙂<|im_end|>"
MIXED_TEXTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "Paris, 2,100,000 people<|endoftext|>Café déjà vu — naïve façade.",
    "  leading spaces, trailing tabs\t\t and\nnewlines\r\n",
    "日本語のテキスト。emoji 🙂🙂 <|im_end|><|im_end|> 1234567890",
]

SPECS = {
    # Every tensor type the tests cover: F32 (norms), F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1.
    "llama-untied": TinyModel(
        tied=False,
        types={
            "token_embd": "Q8_0",
            "attn_q": "Q4_0",
            "attn_k": "Q4_1",
            "attn_v": "F16",
            "attn_output": "BF16",
            "ffn_gate": "Q5_0",
            "ffn_up": "Q5_1",
            "ffn_down": "F16",
            "output": "Q8_0",
        },
    ),
    "llama-tied": TinyModel(tied=True),
    "qwen2": TinyModel(arch="qwen2", pre="qwen2"),
    "llama3": TinyModel(pre="llama-bpe", add_bos=True, n_head_kv=4),
}


@dataclasses.dataclass
class Converted:
    gguf: Path
    out: Path
    source: dict


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Converted]:
    done = {}
    for name, spec in SPECS.items():
        root = tmp_path_factory.mktemp(name)
        source = write_tiny_gguf(root / "model.gguf", spec, seed=len(done))
        out = root / "mlx"
        out.mkdir()
        convert_gguf(root / "model.gguf", out)
        done[name] = Converted(root / "model.gguf", out, source)
    return done


def _mlx_logits(path: Path, ids: list[int]) -> np.ndarray:
    import mlx.core as mx
    from mlx_lm import load

    model, _ = load(str(path))
    return np.array(model(mx.array([ids]))[0].astype(mx.float32))


def _ids(converted: Converted, text: str) -> list[int]:
    return converted.source["tokenizer"].encode(text, add_special_tokens=False).ids


def test_unpermuting_restores_the_rows_llama_cpp_permuted():
    rng = np.random.default_rng(0)
    for heads, shape in ((4, (64, 32)), (2, (32, 32)), (4, (64,))):
        weight = rng.standard_normal(shape)
        permuted = llama_cpp_permute(weight, heads)
        assert not np.array_equal(permuted, weight)
        assert np.array_equal(gguf_tensors.unpermute_rows(permuted, heads), weight)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_converted_logits_match_a_numpy_forward_of_the_gguf_tensors(converted, name):
    case = converted[name]
    ids = _ids(case, PROMPT)
    got = _mlx_logits(case.out, ids)
    want = reference_logits(case.gguf, ids)
    assert got.shape == want.shape == (len(ids), case.source["spec"].vocab_size)
    assert np.abs(got - want).max() <= LOGITS_ATOL


def test_logits_do_not_match_if_the_qk_permutation_is_left_in(converted, tmp_path, monkeypatch):
    # The reference is sensitive to the permutation: the check above is not vacuous.
    monkeypatch.setattr(gguf_tensors, "unpermute_rows", lambda weight, heads: weight)
    case = converted["llama-tied"]
    convert_gguf(case.gguf, tmp_path)
    ids = _ids(case, PROMPT)
    assert np.abs(_mlx_logits(tmp_path, ids) - reference_logits(case.gguf, ids)).max() > 1e-2


def test_every_weight_is_the_dequantized_source_tensor_under_its_hugging_face_name(converted):
    from safetensors.numpy import load_file

    case = converted["llama-untied"]
    spec = case.source["spec"]
    _, source = read_source(case.gguf)
    weights = load_file(str(case.out / "model.safetensors"))
    assert len(weights) == len(source)
    for gguf_name, values in source.items():
        hf, base = gguf_tensors.hf_name(gguf_name)
        heads = {"attn_q": spec.n_head, "attn_k": spec.n_head_kv}.get(base)
        expected = gguf_tensors.unpermute_rows(values, heads) if heads else values
        assert weights[hf].dtype == np.float32
        np.testing.assert_array_equal(weights[hf], expected.astype(np.float32), err_msg=hf)
    # ... and the quantized ones are close to the original float weights (sanity of the test).
    original = case.source["weights"]["model.layers.0.self_attn.q_proj.weight"]
    error = np.abs(weights["model.layers.0.self_attn.q_proj.weight"] - original).max()
    assert 0 < error < 0.25 * np.abs(original).max()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dtype_casts_every_weight(converted, tmp_path, dtype):
    import mlx.core as mx

    case = converted["llama-tied"]
    convert_gguf(case.gguf, tmp_path, dtype=dtype)
    half = mx.load(str(tmp_path / "model.safetensors"))
    full = mx.load(str(case.out / "model.safetensors"))
    assert set(half) == set(full)
    for name, value in half.items():
        assert value.dtype == getattr(mx, dtype)
        want = np.array(full[name])
        got = np.array(value.astype(mx.float32))
        np.testing.assert_allclose(got, want, rtol=2**-7, atol=1e-6, err_msg=name)
    assert json.loads((tmp_path / "config.json").read_text())["torch_dtype"] == dtype


@pytest.mark.parametrize("name", ["llama-tied", "qwen2", "llama3"])
def test_the_rebuilt_tokenizer_encodes_like_the_original(converted, name):
    from tokenizers import Tokenizer

    case = converted[name]
    rebuilt = Tokenizer.from_file(str(case.out / "tokenizer.json"))
    for text in MIXED_TEXTS:
        assert rebuilt.encode(text, add_special_tokens=False).ids == _ids(case, text), text


@pytest.mark.parametrize("name", ["llama-tied", "qwen2", "llama3"])
def test_mixed_text_with_special_tokens_round_trips_through_mlx_lms_tokenizer(converted, name):
    from mlx_lm import load

    _, tokenizer = load(str(converted[name].out))
    special = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    for text in MIXED_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        for token, token_id in special.items():
            assert ids.count(token_id) == text.count(token), (token, text)


def test_the_pre_tokenizer_follows_the_gguf_pre_type(converted):
    from tokenizers import Tokenizer

    def pieces(name: str) -> list[str]:
        tok = Tokenizer.from_file(str(converted[name].out / "tokenizer.json"))
        return [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("in 2024")]

    assert pieces("llama-tied") == ["in", "Ġ", "2", "0", "2", "4"]  # smollm: single digits
    assert pieces("llama3") == ["in", "Ġ", "202", "4"]  # llama-bpe: up to three digits


def test_add_bos_token_prepends_bos_as_the_gguf_says(converted):
    from mlx_lm import load

    _, with_bos = load(str(converted["llama3"].out))
    _, without = load(str(converted["llama-tied"].out))
    assert with_bos.encode("hi")[0] == with_bos.convert_tokens_to_ids("<|im_start|>")
    assert without.encode("hi") == without.encode("hi", add_special_tokens=False)


def test_the_chat_template_renders_through_mlx_lm(converted):
    from mlx_lm import load

    _, tokenizer = load(str(converted["llama-tied"].out))
    messages = [{"role": "user", "content": "Hi there"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_config_and_generation_config_come_from_the_metadata(converted):
    case = converted["llama-tied"]
    tokens = case.source["tokenizer"].get_vocab()
    config = json.loads((case.out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
    assert config["rms_norm_eps"] == 1e-5  # not float32's 9.999999747378752e-06
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    assert config["eos_token_id"] == tokens["<|im_end|>"]
    generation = json.loads((case.out / "generation_config.json").read_text())
    assert generation == {
        "bos_token_id": tokens["<|im_start|>"],
        "eos_token_id": tokens["<|im_end|>"],
        "pad_token_id": tokens["<|endoftext|>"],
        "temperature": 0.6,
        "do_sample": True,
    }
    tokenizer_config = json.loads((case.out / "tokenizer_config.json").read_text())
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    assert tokenizer_config["chat_template"].startswith("{% for message in messages %}")
    untied = json.loads((converted["llama-untied"].out / "config.json").read_text())
    assert untied["tie_word_embeddings"] is False


def _minimal_gguf(path: Path, arch: str, **strings: str) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in strings.items():
        writer.add_string(key.replace("__", "."), value)
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_an_unsupported_architecture_is_a_conversion_error_naming_it(tmp_path):
    src = _minimal_gguf(tmp_path / "m.gguf", "falcon")
    with pytest.raises(ConversionError, match="'falcon' is not supported"):
        convert_gguf(src, tmp_path)


def test_a_sentencepiece_vocabulary_is_a_conversion_error(converted, tmp_path):
    from worker.convert.gguf_tensors import GgufFile
    from worker.convert.gguf_tokenizer import read_vocabulary

    source = GgufFile(converted["llama-tied"].gguf)
    source.metadata["tokenizer.ggml.model"] = "llama"
    with pytest.raises(ConversionError, match="only byte-level BPE"):
        read_vocabulary(source)
    source.metadata["tokenizer.ggml.model"] = "gpt2"
    source.metadata["tokenizer.ggml.pre"] = "tekken"
    with pytest.raises(ConversionError, match="pre-tokenizer 'tekken' is not supported"):
        read_vocabulary(source)


def test_a_file_that_is_not_gguf_is_a_conversion_error(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ConversionError, match="not a readable GGUF file"):
        convert_gguf(tmp_path / "x.gguf", tmp_path)
