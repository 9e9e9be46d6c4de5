"""A tiny random-weight Whisper checkpoint in the Hugging Face layout `mlx_audio.stt.load` reads.

What `openai/whisper-*` ships, with small dimensions: `config.json` (model_type "whisper"),
`model.safetensors` with the transformers tensor names (mlx-audio's `sanitize` maps them),
`generation_config.json` (alignment heads, language and task ids), `preprocessor_config.json`
(the 80-bin log-mel feature extractor) and the tokenizer files `WhisperProcessor` loads.

The vocabulary has the real multilingual layout (51865 ids: 50257 byte-level BPE ids, then
<|endoftext|>, <|startoftranscript|>, 99 language tokens, task tokens, <|notimestamps|> and
1501 timestamps), because mlx-audio derives "multilingual", the language count and the
translate task from the vocabulary size. The BPE part is trained on the standard library's
sources (see `worker.tiny_models.tokenizer`) and padded with pseudo-words to 50257 ids.

The weights are random but deterministic, shaped so that greedy decoding is confident (the
chosen token's probability is high, so Whisper's temperature fallback never samples) and
depends on the audio (cross-attention dominates the residual stream), so transcripts are
reproducible and differ between recordings. Rows of the special tokens in the (tied) output
embedding are zero: the model never predicts <|nocaptions|> or a language it was not given.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from worker.convert.whisper_layout import preprocessor_config
from worker.tiny_models.tokenizer import TokenizerSpec, stdlib_corpus, write_json

SEED = 0
BPE_VOCAB = 50257  # byte-level BPE ids before the special tokens, as in multilingual Whisper
TRAINED_BPE = 2048  # merges learned from the corpus; the rest of the 50257 are pseudo-words
N_MELS = 80
N_AUDIO_CTX = 1500  # 30 s of 10 ms mel frames after the stride-2 convolution: fixed by Whisper
TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>
# The weights are shaped (measured on speech, silence, noise and tones: every window decodes at
# temperature 0, with compression ratios about 1.3-1.7 and mean log-probabilities about -0.4 to
# -0.7 against Whisper's fallback thresholds of 2.4 and -1):
LOGIT_STD = 16.0  # spread of text-token logits: greedy decoding is confident
RESIDUAL_GAIN = 4.0  # attention / MLP outputs outweigh the token embedding in the residual
POS_STD = 0.5  # decoder positions: small next to a token's embedding
CROSS_GAIN = 8.0  # cross-attention output: the audio decides the text
CROSS_Q_SCALE = 16.0  # sharp cross-attention in the first decoder layers: text follows frames
SELF_Q = 1.0  # first decoder layer, head 0: attends to the current token (see `weights`)
SELF_PENALTY = 8.0  # ... and subtracts it and the tokens before it from the residual stream

# The first 99 of Whisper's languages, in token order (mlx_audio's and transformers' order).
LANGUAGE_CODES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
    "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw "
    "gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl "
    "mg as tt haw ln ha ba jw su"
).split()


@dataclass(frozen=True)
class WhisperDims:
    """Shape of a Whisper encoder-decoder (encoder and decoder share the width)."""

    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    max_target_positions: int  # decoder context; a window decodes at most half of it


SIZES: Mapping[str, WhisperDims] = {
    # ~3.4M parameters, almost all in the 51865-row embedding. The encoder's attention over
    # 1500 frames is what a window costs on a CPU, so it has one layer and one head; a window
    # decodes 16 tokens.
    "tiny": WhisperDims(
        d_model=64,
        encoder_layers=1,
        decoder_layers=2,
        encoder_heads=1,
        decoder_heads=2,
        max_target_positions=32,
    ),
}


def special_tokens() -> list[str]:
    """Whisper's added tokens in id order, starting at id BPE_VOCAB."""
    tokens = ["<|endoftext|>", "<|startoftranscript|>"]
    tokens += [f"<|{code}|>" for code in LANGUAGE_CODES]
    tokens += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>"]
    tokens += ["<|nocaptions|>", "<|notimestamps|>"]
    tokens += [f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)]
    return tokens


VOCAB_SIZE = BPE_VOCAB + len(special_tokens())  # 51865, multilingual Whisper's

# GPT-2's pre-tokenizer (what tokenizers' ByteLevel applies with use_regex=True), Whisper's
# special tokens and tokenizer class; `build_tokenizer` and the tokenizer config follow it.
TOKENIZER = TokenizerSpec(
    pretokenize_regex=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    nfc=False,
    added_tokens=tuple((token, True) for token in special_tokens()),
    bos_token="<|endoftext|>",
    eos_token="<|endoftext|>",
    pad_token="<|endoftext|>",
    additional_special_tokens=(),
    chat_template="",
    tokenizer_class="WhisperTokenizer",
    post_processor_adds_bos=False,
)


def _pseudo_words(count: int, taken: set[str]) -> list[str]:
    """`count` distinct pronounceable words ("Ġ" + syllables, GPT-2's byte-level space)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    words: list[str] = []
    n = 0
    while len(words) < count:
        parts, k = [], n
        while True:
            parts.append(syllables[k % len(syllables)])
            k //= len(syllables)
            if k == 0:
                break
        word = "Ġ" + "".join(parts)
        if word not in taken:
            words.append(word)
        n += 1
    return words


def build_tokenizer() -> Tokenizer:
    """GPT-2-style byte-level BPE with Whisper's vocabulary layout and special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TRAINED_BPE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(stdlib_corpus(1 << 20), trainer)
    trained = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = dict(trained["vocab"])
    for word in _pseudo_words(BPE_VOCAB - len(vocab), set(vocab)):
        vocab[word] = len(vocab)
    merges = [
        (a, b) for a, b in (m.split(" ") if isinstance(m, str) else m for m in trained["merges"])
    ]
    full = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    full.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    full.decoder = decoders.ByteLevel()
    full.add_special_tokens(
        [AddedToken(t, special=special, normalized=False) for t, special in TOKENIZER.added_tokens]
    )
    if full.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {full.get_vocab_size()} ids, wanted {VOCAB_SIZE}")
    return full


def config(dims: WhisperDims) -> dict[str, Any]:
    """config.json as transformers' WhisperConfig writes it."""
    ids = _special_ids()
    return {
        "_name_or_path": "tiny-whisper",
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": [220, ids["<|endoftext|>"]],
        "bos_token_id": ids["<|endoftext|>"],
        "d_model": dims.d_model,
        "decoder_attention_heads": dims.decoder_heads,
        "decoder_ffn_dim": 4 * dims.d_model,
        "decoder_layers": dims.decoder_layers,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "dropout": 0.0,
        "encoder_attention_heads": dims.encoder_heads,
        "encoder_ffn_dim": 4 * dims.d_model,
        "encoder_layers": dims.encoder_layers,
        "eos_token_id": ids["<|endoftext|>"],
        "is_encoder_decoder": True,
        "max_length": dims.max_target_positions,
        "max_source_positions": N_AUDIO_CTX,
        "max_target_positions": dims.max_target_positions,
        "model_type": "whisper",
        "num_hidden_layers": dims.encoder_layers,
        "num_mel_bins": N_MELS,
        "pad_token_id": ids["<|endoftext|>"],
        "scale_embedding": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }


def generation_config(dims: WhisperDims) -> dict[str, Any]:
    ids = _special_ids()
    # Alignment heads (word timestamps): every head of the second half of the decoder layers.
    heads = [
        [layer, head]
        for layer in range(dims.decoder_layers // 2, dims.decoder_layers)
        for head in range(dims.decoder_heads)
    ]
    return {
        "alignment_heads": heads,
        "begin_suppress_tokens": [220, ids["<|endoftext|>"]],
        "bos_token_id": ids["<|endoftext|>"],
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "is_multilingual": True,
        "lang_to_id": {f"<|{c}|>": ids[f"<|{c}|>"] for c in LANGUAGE_CODES},
        "max_initial_timestamp_index": 50,
        "max_length": dims.max_target_positions,
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "return_timestamps": False,
        "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
    }


def _special_ids() -> dict[str, int]:
    return {token: BPE_VOCAB + i for i, token in enumerate(special_tokens())}


PREPROCESSOR_CONFIG = preprocessor_config(N_MELS)  # what the converter writes, too


def _tokenizer_config(tok: Tokenizer, dims: WhisperDims) -> dict[str, Any]:
    decoder = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in special_tokens()
    }
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": TOKENIZER.bos_token,
        "clean_up_tokenization_spaces": False,
        "eos_token": TOKENIZER.eos_token,
        "errors": "replace",
        "model_max_length": 1024,
        "pad_token": TOKENIZER.pad_token,
        "processor_class": "WhisperProcessor",
        "return_attention_mask": False,
        "tokenizer_class": TOKENIZER.tokenizer_class,
        "unk_token": TOKENIZER.eos_token,
    }


def weights(dims: WhisperDims) -> dict[str, np.ndarray]:
    """Random float32 weights with the transformers WhisperForConditionalGeneration names."""
    d, ffn = dims.d_model, 4 * dims.d_model
    linear = d**-0.5
    specs: dict[str, tuple[tuple[int, ...], float | None]] = {
        "model.encoder.conv1.weight": ((d, N_MELS, 3), (3 * N_MELS) ** -0.5),
        "model.encoder.conv1.bias": ((d,), 0.0),
        "model.encoder.conv2.weight": ((d, d, 3), (3 * d) ** -0.5),
        "model.encoder.conv2.bias": ((d,), 0.0),
        "model.encoder.embed_positions.weight": ((N_AUDIO_CTX, d), 0.0),  # sinusoids in mlx
        "model.encoder.layer_norm.weight": ((d,), None),
        "model.encoder.layer_norm.bias": ((d,), 0.0),
        "model.decoder.embed_tokens.weight": ((VOCAB_SIZE, d), LOGIT_STD * d**-0.5),
        "model.decoder.embed_positions.weight": ((dims.max_target_positions, d), POS_STD),
        "model.decoder.layer_norm.weight": ((d,), None),
        "model.decoder.layer_norm.bias": ((d,), 0.0),
    }

    def block(prefix: str, attentions: tuple[str, ...], q_scale: float = 1.0) -> None:
        for attn in attentions:
            cross = attn == "encoder_attn"
            for proj in ("q_proj", "k_proj", "v_proj"):
                scale = q_scale if cross and proj == "q_proj" else 1.0
                specs[f"{prefix}{attn}.{proj}.weight"] = ((d, d), scale * linear)
                if proj != "k_proj":  # Whisper's key projections have no bias
                    specs[f"{prefix}{attn}.{proj}.bias"] = ((d,), 0.0)
            gain = CROSS_GAIN if cross else RESIDUAL_GAIN
            specs[f"{prefix}{attn}.out_proj.weight"] = ((d, d), gain * linear)
            specs[f"{prefix}{attn}.out_proj.bias"] = ((d,), 0.0)
            specs[f"{prefix}{attn}_layer_norm.weight"] = ((d,), None)
            specs[f"{prefix}{attn}_layer_norm.bias"] = ((d,), 0.0)
        specs[f"{prefix}fc1.weight"] = ((ffn, d), linear)
        specs[f"{prefix}fc1.bias"] = ((ffn,), 0.0)
        specs[f"{prefix}fc2.weight"] = ((d, ffn), RESIDUAL_GAIN * ffn**-0.5)
        specs[f"{prefix}fc2.bias"] = ((d,), 0.0)
        specs[f"{prefix}final_layer_norm.weight"] = ((d,), None)
        specs[f"{prefix}final_layer_norm.bias"] = ((d,), 0.0)

    for i in range(dims.encoder_layers):
        block(f"model.encoder.layers.{i}.", ("self_attn",))
    for i in range(dims.decoder_layers):
        # The first half reads the audio sharply; the second half (the alignment heads for word
        # timestamps) attends smoothly, so its attention varies from frame to frame.
        q_scale = CROSS_Q_SCALE if i < dims.decoder_layers // 2 else 1.0
        block(f"model.decoder.layers.{i}.", ("self_attn", "encoder_attn"), q_scale)

    tensors = {name: random_tensor(name, shape, std) for name, (shape, std) in specs.items()}
    # The first decoder layer's self-attention subtracts what was written from the residual
    # stream (value = identity, output = -SELF_PENALTY): head 0 attends to the current token
    # (query = key = identity), head 1 evenly to every token so far (no query). Tokens already
    # written then score low, so greedy decoding does not loop on a word, which would make
    # Whisper fall back to sampling.
    first = "model.decoder.layers.0.self_attn."
    half = d // 2  # head 0: dims [0, half) attend to the current token; head 1: evenly
    eye = np.eye(d, dtype=np.float32)
    eye[half:, half:] = 0.0
    tensors[first + "q_proj.weight"][:] = SELF_Q * eye
    tensors[first + "k_proj.weight"][:] = SELF_Q * eye
    tensors[first + "v_proj.weight"][:] = np.eye(d, dtype=np.float32)
    tensors[first + "out_proj.weight"][:] = -SELF_PENALTY * np.eye(d, dtype=np.float32)
    # Special tokens and timestamps never win on their own (logit exactly 0 against a spread of
    # LOGIT_STD); Whisper's decoding rules force the ones it needs (the first timestamp). So a
    # 30 s window is one segment and the decoder never stops early: every window decodes
    # max_target_positions / 2 tokens, and timings are predictable.
    tensors["model.decoder.embed_tokens.weight"][BPE_VOCAB:] = 0.0
    return tensors


def random_tensor(name: str, shape: tuple[int, ...], std: float | None) -> np.ndarray:
    if std is None:
        return np.ones(shape, dtype=np.float32)
    if std == 0.0:
        return np.zeros(shape, dtype=np.float32)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def build(arch: object, dims: WhisperDims, out_dir: Path) -> int:
    """Write every file of a tiny Whisper checkpoint into `out_dir`; return its parameters.

    Signature of `worker.tiny_models.build.Arch.build` (`arch` is unused here)."""
    tok = build_tokenizer()
    tok.save(str(out_dir / "tokenizer.json"))
    vocab = {token: i for token, i in tok.get_vocab(with_added_tokens=False).items()}
    write_json(out_dir / "vocab.json", vocab)
    merges = json.loads(tok.to_str())["model"]["merges"]
    lines = [m if isinstance(m, str) else " ".join(m) for m in merges]
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n")
    write_json(out_dir / "added_tokens.json", {t: tok.token_to_id(t) for t in special_tokens()})
    write_json(out_dir / "tokenizer_config.json", _tokenizer_config(tok, dims))
    write_json(
        out_dir / "special_tokens_map.json",
        {
            "bos_token": "<|endoftext|>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "unk_token": "<|endoftext|>",
        },
    )
    write_json(out_dir / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    write_json(out_dir / "config.json", config(dims))
    write_json(out_dir / "generation_config.json", generation_config(dims))
    tensors = weights(dims)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
