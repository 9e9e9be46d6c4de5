"""Every architecture the builders make, by name: `ARCHS` and `lookup(arch, size)`."""

from __future__ import annotations

from collections.abc import Mapping

from worker.tiny_models import (
    embedding,
    gemma3,
    gpt_oss,
    images,
    kokoro,
    omni,
    scripted,
    text,
    tts,
    tts_families,
    videos,
    vlm,
    vlm_families,
    whisper,
)
from worker.tiny_models.arch import Arch
from worker.tiny_models.text import Dims
from worker.tiny_models.tokenizer import LLAMA3, QWEN2

ARCHS: Mapping[str, Arch] = {
    "qwen3": Arch(
        QWEN2,
        text.qwen3_config,
        text.qwen3_generation_config,
        sizes=text.SIZES,
        build=text.build_text_decoder,
    ),
    # mlx-lm splits it by pipeline as well as by tensor (tests/e2e/test_distributed.py).
    "qwen2": Arch(
        QWEN2,
        text.qwen2_config,
        text.qwen3_generation_config,
        sizes=text.SIZES,
        build=text.build_text_decoder,
    ),
    "llama": Arch(
        LLAMA3,
        text.llama_config,
        text.llama_generation_config,
        sizes=text.SIZES,
        build=text.build_text_decoder,
    ),
    # OpenAI's harmony format, with the template published with GPT-OSS (worker/tiny_models/gpt_oss.py).
    "gpt_oss": Arch(
        gpt_oss.TOKENIZER,
        gpt_oss.config,
        gpt_oss.generation_config,
        sizes=gpt_oss.SIZES,
        build=gpt_oss.build,
    ),
    # Ends its turns with a fixed answer and prefills long prompts fast: the client tier
    # (tests/clients/) runs real agents on it (worker/tiny_models/scripted.py).
    "qwen3_scripted": Arch(
        scripted.TOKENIZER,
        scripted.config,
        text.qwen3_generation_config,
        sizes=scripted.SIZES,
        build=scripted.build,
    ),
    # Speech in, for mlx_audio.stt.load: its own build writes every file (worker/tiny_models/whisper.py).
    "whisper": Arch(
        whisper.TOKENIZER,
        whisper.config,
        whisper.generation_config,
        sizes=whisper.SIZES,
        build=whisper.build,
    ),
    # Speech out, for mlx_audio.tts.load_model: their own builds write every file
    # (worker/tiny_models/tts.py).
    "qwen3_tts": Arch(
        tts.QWEN3_TTS_TOKENIZER,
        tts.qwen3_tts_config,
        tts.qwen3_tts_generation_config,
        sizes=tts.QWEN3_TTS_SIZES,
        build=tts.build_qwen3_tts,
    ),
    # Images in, for mlx_vlm.load: its own build writes every file (worker/tiny_models/vlm.py).
    "qwen2_vl": Arch(
        vlm.TOKENIZER,
        vlm.config,
        vlm.generation_config,
        sizes=vlm.SIZES,
        build=vlm.build,
    ),
    "soprano": Arch(
        tts_families.SOPRANO_TOKENIZER,
        tts_families.soprano_config,
        tts_families.soprano_generation_config,
        sizes=tts_families.SOPRANO_SIZES,
        build=tts_families.build_soprano,
    ),
    # Qwen3-TTS VoiceDesign: voices described by the request's instructions.
    "qwen3_tts_voice_design": Arch(
        tts.QWEN3_TTS_TOKENIZER,
        tts.qwen3_tts_voice_design_config,
        tts.qwen3_tts_generation_config,
        sizes=tts.QWEN3_TTS_SIZES,
        build=tts.build_qwen3_tts_voice_design,
    ),
    # Qwen3-TTS Base: voice cloning (speaker encoder + the codec's encoder).
    "qwen3_tts_base": Arch(
        tts.QWEN3_TTS_TOKENIZER,
        tts.qwen3_tts_base_config,
        tts.qwen3_tts_generation_config,
        sizes=tts.QWEN3_TTS_BASE_SIZES,
        build=tts.build_qwen3_tts_base,
    ),
    # Audio (and images) in, text out, for mlx_vlm.load: a Qwen3-Omni thinker; its own build
    # writes every file (worker/tiny_models/omni.py).
    "qwen3_omni_moe": Arch(
        omni.TOKENIZER,
        omni.config,
        omni.generation_config,
        sizes=omni.SIZES,
        build=omni.build,
    ),
    # More speech-out families (worker/tiny_models/tts_families.py).
    "voxcpm2": Arch(
        tts_families.VOXCPM2_TOKENIZER,
        tts_families.voxcpm2_config,
        tts_families.voxcpm2_generation_config,
        sizes=tts_families.VOXCPM2_SIZES,
        build=tts_families.build_voxcpm2,
    ),
    "moss_tts_nano": Arch(
        tts_families.VOXCPM2_TOKENIZER,  # unused: the build writes a SentencePiece model
        tts_families.moss_tts_nano_config,
        tts_families.moss_tts_nano_generation_config,
        sizes=tts_families.MOSS_TTS_NANO_SIZES,
        build=tts_families.build_moss_tts_nano,
    ),
    "kokoro": Arch(
        tts_families.VOXCPM2_TOKENIZER,  # unused: Kokoro reads phonemes (config vocab)
        kokoro.kokoro_config,
        kokoro.kokoro_generation_config,
        sizes=kokoro.KOKORO_SIZES,
        build=kokoro.build_kokoro,
    ),
    # More image-in families for mlx_vlm.load (worker/tiny_models/vlm_families.py, gemma3.py).
    "qwen2_5_vl": Arch(
        vlm_families.QWEN2_5_VL_TOKENIZER,
        vlm_families.qwen2_5_vl_config,
        vlm_families.qwen2_5_vl_generation_config,
        sizes=vlm_families.SIZES,
        build=vlm_families.build_qwen2_5_vl,
    ),
    "qwen3_vl": Arch(
        vlm_families.QWEN3_VL_TOKENIZER,
        vlm_families.qwen3_vl_config,
        vlm_families.qwen3_vl_generation_config,
        sizes=vlm_families.SIZES,
        build=vlm_families.build_qwen3_vl,
    ),
    "gemma3": Arch(
        gemma3.GEMMA3_TOKENIZER,
        gemma3.gemma3_config,
        gemma3.gemma3_generation_config,
        sizes=vlm_families.SIZES,
        build=gemma3.build_gemma3,
    ),
    # Embeddings (worker/tiny_models/embedding.py): a BERT sentence encoder for mlx-embeddings
    # and a Qwen3-Embedding-style decoder (last-token pooling) for mlx-lm.
    "bert": Arch(
        QWEN2,  # unused: the build trains a WordPiece tokenizer
        lambda dims, tid: embedding.bert_config(dims),
        lambda tid: {},
        sizes=embedding.BERT_SIZES,
        build=embedding.build_bert,
    ),
    "qwen3_embedding": Arch(
        embedding.QWEN3_EMBEDDING_TOKENIZER,
        text.qwen3_config,
        text.qwen3_generation_config,
        sizes=embedding.QWEN3_EMBEDDING_SIZES,
        build=embedding.build_qwen3_embedding,
    ),
    # Rerankers: a BERT cross-encoder (sequence classification, one label) for the
    # mlx-embeddings encoder, and a Qwen3-Reranker-style LLM reranker (a plain qwen3 causal LM
    # whose directory name says "reranker", scored by its yes/no logits on mlx-lm).
    "bert_cross_encoder": Arch(
        QWEN2,  # unused: the build trains a WordPiece tokenizer
        lambda dims, tid: embedding.bert_config(dims),
        lambda tid: {},
        sizes=embedding.CROSS_ENCODER_SIZES,
        build=embedding.build_cross_encoder,
    ),
    "xlm_roberta_cross_encoder": Arch(
        QWEN2,  # unused: the build trains its tokenizer
        lambda dims, tid: embedding.bert_config(dims),
        lambda tid: {},
        sizes={"tiny": embedding.CROSS_ENCODER_SIZES["tiny"]},
        build=embedding.build_xlm_roberta_cross_encoder,
    ),
    "qwen3_reranker": Arch(
        QWEN2,
        text.qwen3_config,
        text.qwen3_generation_config,
        sizes={"tiny": text.SIZES["tiny"]},
        build=text.build_text_decoder,
    ),
    # Images out, for mlx_vlm.generate.image: their own builds write every file
    # (worker/tiny_models/images.py); `config` gives each component's config.json by folder.
    # Their "real" sizes (~20 / ~26 GB) are built only when asked, never by tests.
    "z_image": Arch(
        QWEN2,
        lambda dims, tid: images.z_image_configs(dims),
        lambda tid: {},
        sizes=images.Z_IMAGE_SIZES,
        build=images.build_z_image,
    ),
    "moss_image": Arch(
        QWEN2,
        lambda dims, tid: images.moss_image_configs(dims),
        lambda tid: {},
        sizes=images.MOSS_IMAGE_SIZES,
        build=images.build_moss_image,
    ),
    # Video out, for mlx_vlm.generate.video_generation (worker/tiny_models/videos.py).
    "minimax_h3": Arch(
        vlm_families.QWEN3_VL_TOKENIZER,
        lambda dims, tid: videos.h3_configs(dims, tid),
        lambda tid: {},
        sizes=videos.H3_SIZES,
        build=videos.build_minimax_h3,
    ),
}


def lookup(arch: str, size: str) -> tuple[Arch, Dims]:
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose from: {', '.join(sorted(ARCHS))}")
    spec = ARCHS[arch]
    if size not in spec.sizes:
        choices = ", ".join(sorted(spec.sizes))
        raise ValueError(f"unknown size {size!r} for {arch}; choose from: {choices}")
    return spec, spec.sizes[size]
