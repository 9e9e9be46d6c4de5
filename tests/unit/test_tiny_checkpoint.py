"""The tiny-checkpoint builder: real loaders accept its output, and it builds once, deterministically."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from worker import tiny_models as tc
from worker.tiny_models import build, registry, text

# A local directory never needs the hub; offline makes any accidental lookup fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ARCHS = ("qwen3", "llama")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkpoints")
    for arch in ARCHS:
        tc.ensure_checkpoint(arch, cache_dir=root)
    return root


@pytest.fixture(scope="module")
def loaded(cache: Path) -> dict:
    from mlx_lm import load

    return {arch: load(str(tc.ensure_checkpoint(arch, cache_dir=cache))) for arch in ARCHS}


def _chat(tokenizer, messages: list[dict], **kwargs) -> str:
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, **kwargs
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_mlx_lm_loads_checkpoint_with_its_model_type(loaded: dict, arch: str) -> None:
    model, tokenizer = loaded[arch]
    assert model.model_type == arch
    assert model.args.vocab_size == len(tokenizer.get_vocab()) == text.SIZES["tiny"].vocab


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_accepts_config(cache: Path, arch: str) -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tc.ensure_checkpoint(arch, cache_dir=cache))
    assert config.model_type == arch


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_tokenizer_matches_tokenizer_json(cache: Path, arch: str) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    path = tc.ensure_checkpoint(arch, cache_dir=cache)
    text = "<|im_start|>user\nHi  there!\n\tx = 12345 <think>ok</think><|eot_id|> é🙂"
    raw = Tokenizer.from_file(str(path / "tokenizer.json"))
    assert AutoTokenizer.from_pretrained(path).encode(text) == raw.encode(text).ids


@pytest.mark.parametrize("arch", ARCHS)
def test_tokenizer_round_trips_text(loaded: dict, arch: str) -> None:
    _, tokenizer = loaded[arch]
    text = "Hello, world!\n\tdef f(x): return x ** 2  # ünïcødé, 中文, emoji 🙂"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_qwen3_chat_template_renders_chatml(loaded: dict) -> None:
    _, tokenizer = loaded["qwen3"]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert _chat(tokenizer, messages, enable_thinking=True) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_qwen3_chat_template_closes_think_block_when_thinking_is_off(loaded: dict) -> None:
    _, tokenizer = loaded["qwen3"]
    prompt = _chat(tokenizer, [{"role": "user", "content": "Hi"}], enable_thinking=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_qwen3_think_and_chat_markers_are_single_tokens(loaded: dict) -> None:
    _, tokenizer = loaded["qwen3"]
    for marker in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"):
        assert len(tokenizer.encode(marker, add_special_tokens=False)) == 1
    assert tokenizer.has_thinking


def test_llama_chat_template_renders_llama3_layout_with_one_bos(loaded: dict) -> None:
    _, tokenizer = loaded["llama"]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert _chat(tokenizer, messages) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert ids.count(tokenizer.bos_token_id) == 1


def test_llama_tokenizer_adds_bos_to_plain_text(loaded: dict) -> None:
    _, tokenizer = loaded["llama"]
    ids = tokenizer.encode("Hi")
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_generation_is_deterministic(loaded: dict, arch: str) -> None:
    from mlx_lm import generate

    model, tokenizer = loaded[arch]
    prompt = _chat(tokenizer, [{"role": "user", "content": "Tell me a story."}])
    first = generate(model, tokenizer, prompt, max_tokens=24)
    assert first and generate(model, tokenizer, prompt, max_tokens=24) == first


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_generation_depends_on_prompt(loaded: dict, arch: str) -> None:
    from mlx_lm import generate

    model, tokenizer = loaded[arch]
    prompts = [
        _chat(tokenizer, [{"role": "user", "content": text}])
        for text in ("Tell me a story.", "What is 2+2?", "def f(x):")
    ]
    outputs = {generate(model, tokenizer, prompt, max_tokens=16) for prompt in prompts}
    assert len(outputs) == 3


@pytest.mark.parametrize("arch", ARCHS)
def test_eos_logits_are_exactly_zero(loaded: dict, arch: str) -> None:
    import mlx.core as mx

    model, tokenizer = loaded[arch]
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    logits = model(mx.array([ids]))[0, -1]
    eos = sorted(tokenizer.eos_token_ids)
    assert len(eos) == 2
    assert logits[mx.array(eos)].tolist() == [0.0, 0.0]
    assert logits.max().item() > 0.0


def test_generation_config_lists_eos_ids_and_qwen3_sampling_defaults(cache: Path) -> None:
    path = tc.ensure_checkpoint("qwen3", cache_dir=cache)
    generation = json.loads((path / "generation_config.json").read_text())
    config = json.loads((path / "config.json").read_text())
    assert config["eos_token_id"] in generation["eos_token_id"]
    assert (generation["temperature"], generation["top_p"], generation["top_k"]) == (0.6, 0.95, 20)


def test_tokenizer_config_inlines_template_and_legacy_special_tokens(cache: Path) -> None:
    path = tc.ensure_checkpoint("qwen3", cache_dir=cache)
    config = json.loads((path / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in config["chat_template"]
    assert config["additional_special_tokens"] == ["<|im_start|>", "<|im_end|>"]
    assert not (path / "chat_template.jinja").exists()


def test_cached_checkpoint_is_returned_without_rebuilding(cache: Path) -> None:
    path = tc.ensure_checkpoint("qwen3", cache_dir=cache)
    before = (path / "model.safetensors").stat().st_mtime_ns
    assert tc.ensure_checkpoint("qwen3", cache_dir=cache) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == before


def test_force_rebuilds_in_place(tmp_path: Path) -> None:
    path = tc.ensure_checkpoint("qwen3", cache_dir=tmp_path)
    (path / "stale").write_text("x")
    assert tc.ensure_checkpoint("qwen3", cache_dir=tmp_path, force=True) == path
    assert not (path / "stale").exists() and (path / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_builds_are_byte_identical(cache: Path, tmp_path: Path) -> None:
    first = tc.ensure_checkpoint("llama", cache_dir=cache)
    second = tc.ensure_checkpoint("llama", cache_dir=tmp_path)
    for name in sorted(os.listdir(first)):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_the_omni_talker_build_is_byte_identical_too(tmp_path: Path) -> None:
    # Its talker's Linear biases keep their initial values, which MLX draws at random: the
    # builder seeds them (two builds differed in 8 tensors before).
    pytest.importorskip("mlx_vlm")
    first = tc.ensure_checkpoint("qwen3_omni_moe", "talker", cache_dir=tmp_path / "a")
    second = tc.ensure_checkpoint("qwen3_omni_moe", "talker", cache_dir=tmp_path / "b")
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()


def test_cache_dir_defaults_to_environment_variable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VOMLX_CACHE_DIR", str(tmp_path))
    assert tc.cache_root() == tmp_path
    assert tc.cache_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_losing_a_build_race_keeps_the_winner(tmp_path: Path, monkeypatch) -> None:
    winner = tmp_path / tc.checkpoint_name("qwen3", "tiny")

    def racing_build(arch: tc.Arch, dims: text.Dims, out_dir: Path) -> int:
        # Another process finishes its build while this one is still writing.
        winner.mkdir()
        (winner / "config.json").write_text("{}")
        (out_dir / "config.json").write_text("{}")
        return 0

    monkeypatch.setitem(
        registry.ARCHS, "qwen3", dataclasses.replace(registry.ARCHS["qwen3"], build=racing_build)
    )
    assert tc.ensure_checkpoint("qwen3", cache_dir=tmp_path) == winner
    assert [p.name for p in tmp_path.iterdir()] == [winner.name]


def test_unknown_arch_error_lists_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"choose from: .*llama, .*qwen3, "):
        tc.ensure_checkpoint("gpt5", cache_dir=tmp_path)


def test_cli_prints_path_as_last_line(cache: Path, capsys) -> None:
    assert build.main(["--arch", "llama", "--cache-dir", str(cache)]) == 0
    last_line = capsys.readouterr().out.splitlines()[-1]
    assert Path(last_line) == tc.ensure_checkpoint("llama", cache_dir=cache)


def test_cli_rejects_unknown_size_listing_choices(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build.main(["--size", "huge", "--cache-dir", str(tmp_path)])
    assert exit_info.value.code != 0
    assert "20m" in capsys.readouterr().err


def test_mlx_vlm_loads_qwen2_vl_and_renders_image_parts(tmp_path: Path) -> None:
    pytest.importorskip("mlx_vlm")
    from mlx_vlm import load
    from mlx_vlm.prompt_utils import apply_chat_template

    path = tc.ensure_checkpoint("qwen2_vl", cache_dir=tmp_path)
    model, processor = load(str(path))
    assert model.config.model_type == "qwen2_vl"
    assert type(processor).__name__ == "Qwen2VLProcessor"
    assert type(processor.image_processor).__name__.endswith("ImageProcessor")
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}]
    prompt = apply_chat_template(processor, model.config, messages, num_images=1)
    assert prompt.endswith(
        "<|im_start|>user\nHi<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert model.config.image_token_id == image_pad
    # Special tokens have zero output rows: the model practically never ends on its own.
    rows = np.asarray(model.language_model.model.embed_tokens.weight)[image_pad]
    assert not rows.any()


def test_mlx_vlm_loads_every_weight_of_qwen3_omni_moe(tmp_path: Path) -> None:
    pytest.importorskip("mlx_vlm")
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm import load

    path = tc.ensure_checkpoint("qwen3_omni_moe", cache_dir=tmp_path)
    model, processor = load(str(path))
    assert model.config.model_type == "qwen3_omni_moe"
    assert type(processor).__name__ == "Qwen3OmniMoeProcessor"
    assert type(processor.feature_extractor).__name__ == "WhisperFeatureExtractor"
    assert processor.feature_extractor.feature_size == 128
    # Loaders may skip absent weights silently: every parameter must be one that was written,
    # with the written values (after mlx-vlm's own renaming and layout changes).
    written = model.sanitize(dict(mx.load(str(path / "model.safetensors"))))
    params = dict(tree_flatten(model.parameters()))
    assert sorted(params) == sorted(written)
    assert all(mx.array_equal(params[name], written[name]) for name in params)
    assert model.talker is None  # text out only (enable_audio_output false)


def test_qwen3_omni_template_renders_audio_parts_and_their_tokens_never_win(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mlx_vlm")
    from mlx_vlm import load
    from mlx_vlm.prompt_utils import apply_chat_template

    path = tc.ensure_checkpoint("qwen3_omni_moe", cache_dir=tmp_path)
    model, processor = load(str(path))
    messages = [{"role": "user", "content": "Hi"}]
    prompt = apply_chat_template(processor, model.config, messages, num_audios=1)
    assert prompt.endswith(
        "<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|>Hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    tokenizer = processor.tokenizer
    audio_pad = tokenizer.convert_tokens_to_ids(tokenizer.audio_token)
    assert model.config.thinker_config.audio_token_id == audio_pad
    assert tokenizer.encode("<|audio_start|><|audio_pad|>", add_special_tokens=False) == [
        model.config.thinker_config.audio_start_token_id,
        audio_pad,
    ]
    lm_head = np.asarray(model.language_model.lm_head.weight)
    for token in ("<|im_end|>", "<|endoftext|>", "<|audio_pad|>", "<think>"):
        assert not lm_head[tokenizer.convert_tokens_to_ids(token)].any()


def _every_parameter_is_a_written_one(model, written: dict) -> None:
    """Loaders may skip absent weights silently: every parameter must be one that was written,
    with the written values (after the loader's own renaming)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    params = dict(tree_flatten(model.parameters()))
    assert sorted(params) == sorted(written)
    assert all(mx.array_equal(params[name], written[name]) for name in params)


def test_mlx_audio_loads_every_weight_of_voxcpm2(tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx_audio.tts.utils import load_model

    path = tc.ensure_checkpoint("voxcpm2", cache_dir=tmp_path)
    model = load_model(path)
    assert type(model).__module__ == "mlx_audio.tts.models.voxcpm2.voxcpm2"
    assert model.tokenizer is not None and model.sample_rate == 16000
    _every_parameter_is_a_written_one(model, dict(mx.load(str(path / "model.safetensors"))))


def test_mlx_audio_loads_every_weight_of_moss_tts_nano_and_its_codec(tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx_audio.codec.models.moss_audio_tokenizer import moss_audio_tokenizer as codec
    from mlx_audio.tts.utils import load_model

    path = tc.ensure_checkpoint("moss_tts_nano", cache_dir=tmp_path)
    model = load_model(path)
    assert model.model_type == "moss_tts_nano" and model.tokenizer is not None
    control = ("<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>")
    control += ("<|audio_user_slot|>", "<|audio_assistant_slot|>")
    pieces = [model.tokenizer.processor.piece_to_id(piece) for piece in control]
    assert pieces == list(range(4, 10))  # MOSS's config ids for its markers
    _every_parameter_is_a_written_one(model, dict(mx.load(str(path / "model.safetensors"))))
    tokenizer = model._ensure_audio_tokenizer()
    assert (tokenizer.sample_rate, tokenizer.channels) == (8000, 2)
    written = codec._sanitize_audio_tokenizer_weights(
        dict(mx.load(str(path / "audio_tokenizer" / "model.safetensors")))
    )
    _every_parameter_is_a_written_one(tokenizer, written)


# Image families beyond Qwen2-VL (worker/tiny_models/vlm_families.py): the transformers tensor
# names -> mlx-vlm's parameter names, spelled out here rather than taken from mlx-vlm's own
# `sanitize`, so a weight the loader drops or misplaces is noticed.
IMAGE_FAMILY_RENAMES = {
    "qwen2_5_vl": (("visual.", "vision_tower."), ("model.", "language_model.model.")),
    "qwen3_vl": (
        ("model.visual.", "vision_tower."),
        ("model.language_model.", "language_model.model."),
    ),
    "gemma3": (),  # published with mlx-vlm's names already
}
IMAGE_FAMILY_PROMPTS = {
    "qwen2_5_vl": "<|im_start|>user\nHi<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
    "<|im_start|>assistant\n",
    "qwen3_vl": "<|im_start|>user\nHi<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
    "<|im_start|>assistant\n",
    "gemma3": "<bos><start_of_turn>user\nHi<start_of_image><end_of_turn>\n<start_of_turn>model\n",
}


def _mlx_name(arch: str, name: str) -> str:
    for old, new in IMAGE_FAMILY_RENAMES[arch]:
        if name.startswith(old):
            return new + name.removeprefix(old)
    return name


def _mlx_layout(array: np.ndarray) -> np.ndarray:
    # PyTorch convolutions are channels-first; MLX's are channels-last.
    if array.ndim == 5:
        return array.transpose(0, 2, 3, 4, 1)
    if array.ndim == 4:
        return array.transpose(0, 2, 3, 1)
    return array


@pytest.fixture(scope="module")
def image_families(tmp_path_factory: pytest.TempPathFactory) -> dict:
    pytest.importorskip("mlx_vlm")
    from mlx_vlm import load

    root = tmp_path_factory.mktemp("image_families")
    out = {}
    for arch in IMAGE_FAMILY_RENAMES:
        path = tc.ensure_checkpoint(arch, cache_dir=root)
        out[arch] = (path, *load(str(path)))
    return out


@pytest.mark.parametrize("arch", sorted(IMAGE_FAMILY_RENAMES))
def test_mlx_vlm_loads_every_weight_of_image_family(image_families: dict, arch: str) -> None:
    from mlx.utils import tree_flatten
    from safetensors.numpy import load_file

    path, model, _ = image_families[arch]
    assert model.config.model_type == arch
    written = {
        _mlx_name(arch, name): _mlx_layout(value)
        for name, value in load_file(path / "model.safetensors").items()
    }
    if arch == "gemma3":  # tied: mlx-vlm copies the embedding into its lm_head
        written["language_model.lm_head.weight"] = written[
            "language_model.model.embed_tokens.weight"
        ]
    loaded = {name: np.asarray(value) for name, value in tree_flatten(model.parameters())}
    assert sorted(loaded) == sorted(written)
    assert [name for name in loaded if not np.array_equal(loaded[name], written[name])] == []


@pytest.mark.parametrize("arch", sorted(IMAGE_FAMILY_RENAMES))
def test_image_family_template_renders_image_parts(image_families: dict, arch: str) -> None:
    from mlx_vlm.prompt_utils import apply_chat_template

    _, model, processor = image_families[arch]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}]
    prompt = apply_chat_template(processor, model.config, messages, num_images=1)
    assert prompt.endswith(IMAGE_FAMILY_PROMPTS[arch])


@pytest.mark.parametrize("arch", sorted(IMAGE_FAMILY_RENAMES))
def test_image_family_image_tokens_expand_and_special_rows_are_zero(
    image_families: dict, arch: str
) -> None:
    from PIL import Image

    from worker.tiny_models.gemma3 import GEMMA3_TOKENS_PER_IMAGE

    _, model, processor = image_families[arch]
    config = model.config
    image_id = config.image_token_index if arch == "gemma3" else config.image_token_id
    tokenizer = processor.tokenizer
    marker = "<start_of_image>" if arch == "gemma3" else "<|vision_start|><|image_pad|>"
    image = Image.new("RGB", (64, 64), (200, 30, 90))
    ids = np.asarray(processor(text=[f"Hi {marker}"], images=[image])["input_ids"]).ravel()
    # 64 x 64 px: Gemma 3 always 16 soft tokens; Qwen2.5-VL 4 x 4 merged patches of 14 px
    # (64 -> 56 px); Qwen3-VL 2 x 2 merged patches of 16 px.
    expected = {"gemma3": GEMMA3_TOKENS_PER_IMAGE, "qwen2_5_vl": 4, "qwen3_vl": 4}[arch]
    assert int((ids == image_id).sum()) == expected
    # Added tokens (EOS, turn and image markers, ...) have zero rows in the tied output
    # embedding, every ordinary token a random one: the model practically never ends.
    rows = np.asarray(model.language_model.model.embed_tokens.weight)
    added = sorted(tokenizer.added_tokens_decoder)
    assert image_id in added and tokenizer.eos_token_id in added
    assert np.flatnonzero(~rows.any(axis=1)).tolist() == added


def test_gemma3_tokenizer_is_sentencepiece_style_with_byte_fallback(image_families: dict) -> None:
    _, _, processor = image_families["gemma3"]
    tokenizer = processor.tokenizer
    text = "Hello,  world!\n\tx = 12345 é🙂 return"
    ids = tokenizer.encode(text)
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert "▁return" in tokenizer.convert_ids_to_tokens(ids)
    assert "<0xF0>" in tokenizer.convert_ids_to_tokens(ids)  # the emoji's first byte


# Kokoro's upstream (PyTorch) names -> mlx-audio's, spelled out here rather than taken from
# mlx-audio's own `sanitize`, so a weight the loader drops or misplaces is noticed.
KOKORO_LSTM_RENAMES = {
    "weight_ih_l0": "Wx_forward",
    "weight_hh_l0": "Wh_forward",
    "bias_ih_l0": "bias_ih_forward",
    "bias_hh_l0": "bias_hh_forward",
    "weight_ih_l0_reverse": "Wx_backward",
    "weight_hh_l0_reverse": "Wh_backward",
    "bias_ih_l0_reverse": "bias_ih_backward",
    "bias_hh_l0_reverse": "bias_hh_backward",
    "gamma": "weight",
    "beta": "bias",
}


def test_mlx_audio_loads_every_weight_and_voice_pack_of_kokoro(tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_audio.tts.models.kokoro.voice import load_voice_tensor
    from mlx_audio.tts.utils import load_model

    path = tc.ensure_checkpoint("kokoro", cache_dir=tmp_path)
    model = load_model(path)
    assert type(model).__module__ == "mlx_audio.tts.models.kokoro.kokoro"
    assert model.sample_rate == 24000
    written = {}
    for name, value in mx.load(str(next(path.glob("*.safetensors")))).items():
        head, _, leaf = name.rpartition(".")
        written[f"{head}.{KOKORO_LSTM_RENAMES.get(leaf, leaf)}"] = value
    params = dict(tree_flatten(model.parameters()))
    assert sorted(params) == sorted(written)
    for name, param in params.items():
        value = written[name]
        # Convolution kernels are stored (out, in, kernel), as PyTorch has them; MLX's are
        # (out, kernel, in).
        if param.shape != value.shape:
            value = value.transpose(0, 2, 1)
        assert mx.array_equal(param, value), name
    voices = sorted(p.stem for p in (path / "voices").glob("*.safetensors"))
    assert voices == sorted(("af_heart", "ef_dora", "ff_siwis"))
    packs = [load_voice_tensor(str(path / "voices" / f"{v}.safetensors")) for v in voices]
    assert all(pack.shape == (510, 1, 256) for pack in packs)
    assert not mx.array_equal(packs[0], packs[1])


def test_the_real_size_qwen3_tts_has_the_real_models_shapes() -> None:
    # Built by benchmarks only (~2.6 GB): its config against mlx-audio's defaults, which are
    # Qwen3-TTS-12Hz-0.6B's (talker, code predictor; the codec takes the defaults whole).
    from mlx_audio.tts.models.qwen3_tts.config import ModelConfig, Qwen3TTSTalkerConfig

    from worker.tiny_models import tts

    config = ModelConfig.from_dict(tts.qwen3_tts_config(tts.QWEN3_TTS_SIZES["real"], lambda _: 0))
    real = Qwen3TTSTalkerConfig()
    shape = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    shape += ("head_dim", "intermediate_size")
    for name in (*shape, "text_hidden_size", "num_code_groups"):
        assert getattr(config.talker_config, name) == getattr(real, name), name
    for name in shape:
        got = getattr(config.talker_config.code_predictor_config, name)
        assert got == getattr(real.code_predictor_config, name), name
    assert tts.REAL_SPEECH_TOKENIZER_CONFIG["decoder_config"] == {}
    assert config.sample_rate == 24000 and "real" not in tts.QWEN3_TTS_BASE_SIZES
