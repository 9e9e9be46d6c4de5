"""The talker variant of the tiny Qwen3-Omni (worker/tiny_models/omni.py): its config.json
sections (audio output on, codec ids and speakers inside the talker's 256-entry vocabulary, a
small code2wav) and random talker and code2wav weights in mlx-vlm's own layout, so that
Qwen3-Omni speaks for itself (worker/vision/talker.py)."""

from __future__ import annotations

from typing import Any

# The talker's codec ids and speakers, inside its 256-entry vocabulary.
_CODEC_IDS = {"codec_pad_id": 250, "codec_bos_id": 251, "codec_eos_token_id": 252,
              "codec_nothink_id": 253, "codec_think_bos_id": 254, "codec_think_eos_id": 255}  # fmt: skip
_SPEAKERS = {"chelsie": 240, "ethan": 241, "aiden": 242}
_CODE2WAV = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
             "num_attention_heads": 2, "num_key_value_heads": 2, "decoder_dim": 64,
             "codebook_dim": 16, "codebook_size": 256, "num_quantizers": 4,
             "semantic_codebook_size": 256, "vector_quantization_hidden_dimension": 16,
             "sliding_window": 8}  # fmt: skip


def _role_ids(tok: Any) -> dict[str, int]:
    """ChatML's role ids for the talker, which finds each turn by the token after
    <|im_start|>: the first token of each role name (the tiny BPE splits them)."""
    ids = {f"{role}_token_id": tok.encode(role).ids[0] for role in ("user", "assistant", "system")}
    assert len(set(ids.values())) == 3, ids
    return ids


def talker_config(config: dict[str, Any], tok: Any) -> dict[str, Any]:
    """config.json of the talker variant: audio output on, its sections sized to the tiny
    vocabularies."""
    config = {**config, "enable_audio_output": True, "code2wav_config": _CODE2WAV,
              **_role_ids(tok)}  # fmt: skip
    config["talker_config"] = {**config["talker_config"], **_CODEC_IDS, "speaker_id": _SPEAKERS}
    return config


def talker_tensors(config: dict[str, Any]) -> dict[str, Any]:
    """Random talker and code2wav weights in mlx-vlm's own layout (its sanitize leaves them
    as they are): the parameters of its modules, drawn as worker/tiny_models/tts.py draws
    a TTS model's."""
    import mlx.core as mx
    import numpy as np
    from mlx.utils import tree_flatten
    from mlx_vlm.models.qwen3_omni_moe.code2wav import Code2WavModel
    from mlx_vlm.models.qwen3_omni_moe.config import ModelConfig
    from mlx_vlm.models.qwen3_omni_moe.talker import Talker

    from worker.tiny_models.tts import SEED, randomize

    mx.random.seed(SEED)  # the Linear biases keep their (random) initial values
    model_config = ModelConfig.from_dict(config)
    params = {}
    for prefix, module in (("talker", Talker(model_config.talker_config)),
                           ("code2wav", Code2WavModel(model_config.code2wav_config))):  # fmt: skip
        flat = tree_flatten(module.parameters())
        assert isinstance(flat, list)
        for name, value in flat:
            params[f"{prefix}.{name}"] = np.array(value)
    return randomize(params)
