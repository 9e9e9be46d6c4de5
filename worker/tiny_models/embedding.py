"""Tiny random-weight embedding checkpoints in the sentence-transformers layout.

`bert`: what `sentence-transformers/all-MiniLM-L6-v2` ships, with small dimensions and
mlx-embeddings' reader in mind: `config.json` (BertModel), `model.safetensors` with the
transformers BERT tensor names, a WordPiece tokenizer (lower-casing, [CLS] text [SEP]) trained
on the standard library's sources (`tokenizer.json`, `vocab.txt`, `tokenizer_config.json`,
`special_tokens_map.json`), `modules.json` (Transformer, Pooling, Normalize),
`1_Pooling/config.json` and `sentence_bert_config.json`. Size "tiny" pools the mean and
normalises, as MiniLM does; "tiny_cls" pools the [CLS] token, does not normalise and declares
Matryoshka training (config.json `matryoshka_dimensions`), so both paths are exercised.

`qwen3_embedding`: a Qwen3-Embedding-style decoder for mlx-lm: the tiny qwen3 checkpoint whose
tokenizer appends <|endoftext|> to every text (as Qwen3-Embedding's does), pooled on that last
token and normalised (`1_Pooling` with `pooling_mode_lasttoken`).

`bert_cross_encoder`: a reranker as transformers saves one (BertForSequenceClassification, one
label), for the cross-encoder path; `xlm_roberta_cross_encoder` the same for
XLMRobertaForSequenceClassification (RoBERTa's head, no pooler). The LLM reranker (`qwen3_reranker` in registry.py) is the
tiny qwen3 decoder itself: Qwen3-Reranker ships a plain Qwen3ForCausalLM checkpoint, and its
tokenizer has "yes" and "no" as single tokens, as the tiny one does.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from worker.tiny_models.text import SIZES as TEXT_SIZES
from worker.tiny_models.text import Dims, decoder_weights, qwen3_config
from worker.tiny_models.tokenizer import (
    QWEN2,
    TokenizerSpec,
    id_of,
    stdlib_corpus,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

SEED = 0
BERT_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4, like BERT's order


@dataclass(frozen=True)
class BertDims:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    pooling: str  # "mean" or "cls"
    normalize: bool
    matryoshka_dimensions: tuple[int, ...] = ()
    activation: str = ""  # a cross-encoder's named activation ("" names none)


BERT_SIZES: Mapping[str, BertDims] = {
    # ~0.2M parameters; inputs up to 128 tokens, so "too long" is cheap to send.
    "tiny": BertDims(64, 2, 4, 128, 2048, 128, "mean", True),
    "tiny_cls": BertDims(64, 2, 4, 128, 2048, 128, "cls", False, (16, 32, 64)),
}


def bert_config(d: BertDims) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": d.intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": d.max_positions,
        "model_type": "bert",
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": d.vocab,
    }
    if d.matryoshka_dimensions:
        config["is_matryoshka"] = True
        config["matryoshka_dimensions"] = list(d.matryoshka_dimensions)
    return config


def train_wordpiece(vocab_size: int) -> Tokenizer:
    """A lower-casing WordPiece tokenizer with BERT's pipeline and special tokens first."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=list(BERT_SPECIAL), show_progress=False
    )
    tok.train_from_iterator(stdlib_corpus(max(1 << 20, 256 * vocab_size)), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def write_sentence_transformers(
    out_dir: Path, width: int, pooling: str, normalize: bool, max_seq_length: int
) -> None:
    """modules.json, 1_Pooling/config.json and sentence_bert_config.json."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}
        )  # fmt: skip
    write_json(out_dir / "modules.json", modules)
    (out_dir / "1_Pooling").mkdir(exist_ok=True)
    flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
             "lasttoken": "pooling_mode_lasttoken"}  # fmt: skip
    pooling_config: dict[str, Any] = {"word_embedding_dimension": width}
    for flag in (*flags.values(), "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"):
        pooling_config[flag] = flag == flags[pooling]
    write_json(out_dir / "1_Pooling" / "config.json", pooling_config)
    write_json(
        out_dir / "sentence_bert_config.json",
        {"max_seq_length": max_seq_length, "do_lower_case": False},
    )


def bert_weights(d: BertDims) -> dict[str, np.ndarray]:
    """Random float32 weights with the transformers BertModel names."""
    h, inter = d.hidden, d.intermediate
    specs: dict[str, tuple[tuple[int, ...], str]] = {
        "embeddings.word_embeddings.weight": ((d.vocab, h), "normal"),
        "embeddings.position_embeddings.weight": ((d.max_positions, h), "normal"),
        "embeddings.token_type_embeddings.weight": ((2, h), "normal"),
        "embeddings.LayerNorm.weight": ((h,), "ones"),
        "embeddings.LayerNorm.bias": ((h,), "zeros"),
        "pooler.dense.weight": ((h, h), "linear"),
        "pooler.dense.bias": ((h,), "zeros"),
    }
    for i in range(d.layers):
        p = f"encoder.layer.{i}."
        for name, out, fan_in in (
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ):
            specs[p + name + ".weight"] = ((out, fan_in), "linear")
            specs[p + name + ".bias"] = ((out,), "small")
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            specs[p + norm + ".weight"] = ((h,), "ones")
            specs[p + norm + ".bias"] = ((h,), "zeros")
    return {name: _tensor(name, shape, kind) for name, (shape, kind) in specs.items()}


def _tensor(name: str, shape: tuple[int, ...], kind: str) -> np.ndarray:
    if kind == "ones":
        return np.ones(shape, dtype=np.float32)
    if kind == "zeros":
        return np.zeros(shape, dtype=np.float32)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    std = {"normal": 1.0, "small": 0.02}.get(kind, shape[-1] ** -0.5)
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def build_bert(arch: Any, dims: BertDims, out_dir: Path) -> int:
    tok = train_wordpiece(dims.vocab)
    if tok.get_vocab_size() != dims.vocab:
        raise RuntimeError(f"WordPiece training reached {tok.get_vocab_size()} of {dims.vocab}")
    tok.save(str(out_dir / "tokenizer.json"))
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    (out_dir / "vocab.txt").write_text("".join(token + "\n" for token, _ in vocab))
    write_json(
        out_dir / "tokenizer_config.json",
        {
            "do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]",
            "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
            "tokenize_chinese_chars": True, "strip_accents": None,
            "tokenizer_class": "BertTokenizer", "model_max_length": dims.max_positions,
        },
    )  # fmt: skip
    write_json(
        out_dir / "special_tokens_map.json",
        {t.strip("[]").lower() + "_token": t for t in BERT_SPECIAL},
    )
    write_json(out_dir / "config.json", bert_config(dims))
    write_sentence_transformers(
        out_dir, dims.hidden, dims.pooling, dims.normalize, dims.max_positions
    )
    weights = bert_weights(dims)
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())


# -- a Qwen3-Embedding-style decoder ------------------------------------------------------

QWEN3_EMBEDDING_SIZES: Mapping[str, Dims] = {"tiny": TEXT_SIZES["tiny"]}
EOS = "<|endoftext|>"


def build_qwen3_embedding(arch: Any, dims: Dims, out_dir: Path) -> int:
    spec: TokenizerSpec = arch.tokenizer
    tok = train_tokenizer(spec, dims.vocab)
    # Qwen3-Embedding's tokenizer ends every text with <|endoftext|>: the token it pools.
    eos = tok.token_to_id(EOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"$A {EOS}", pair=f"$A {EOS} $B:1 {EOS}:1", special_tokens=[(EOS, eos)]
            ),
        ]
    )
    write_tokenizer_files(spec, tok, out_dir, model_max_length=dims.max_positions)
    config = qwen3_config(dims, id_of(tok))
    config["architectures"] = ["Qwen3ForCausalLM"]
    write_json(out_dir / "config.json", config)
    write_sentence_transformers(out_dir, dims.hidden, "lasttoken", True, 512)
    weights = decoder_weights(config, zero_rows=[])
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())


QWEN3_EMBEDDING_TOKENIZER = QWEN2


# -- a cross-encoder (BertForSequenceClassification) --------------------------------------

CROSS_ENCODER_SIZES: Mapping[str, BertDims] = {
    # "tiny": one label, no activation named (sentence-transformers then applies Sigmoid);
    # "tiny_logit": names Identity as ms-marco cross-encoders do, so scores are raw logits.
    "tiny": BertDims(64, 2, 4, 128, 2048, 128, "cls", False),
    "tiny_logit": BertDims(
        64, 2, 4, 128, 2048, 128, "cls", False, activation="torch.nn.modules.linear.Identity"
    ),
}


def build_cross_encoder(arch: Any, dims: BertDims, out_dir: Path) -> int:
    """What `cross-encoder/ms-marco-MiniLM-L-6-v2` ships, small: a BertForSequenceClassification
    config with one label, the encoder's weights under `bert.` and `classifier.weight` /
    `classifier.bias`, and the WordPiece tokenizer pairing two texts as
    `[CLS] A [SEP] B [SEP]` (B's token type 1). No sentence-transformers pooling files."""
    build_bert(arch, dims, out_dir)
    for name in ("modules.json", "sentence_bert_config.json"):
        (out_dir / name).unlink()
    (out_dir / "1_Pooling" / "config.json").unlink()
    (out_dir / "1_Pooling").rmdir()
    config = bert_config(dims)
    config.update(
        architectures=["BertForSequenceClassification"],
        id2label={"0": "LABEL_0"},
        label2id={"LABEL_0": 0},
    )
    if dims.activation:
        config["sbert_ce_default_activation_function"] = dims.activation
    write_json(out_dir / "config.json", config)
    weights = {"bert." + k: v for k, v in bert_weights(dims).items()}
    weights["classifier.weight"] = _tensor("classifier.weight", (1, dims.hidden), "normal")
    weights["classifier.bias"] = np.full((1,), 0.1, dtype=np.float32)
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())


XLM_ROBERTA_SPECIAL = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # ids 0..4, XLM-R's order


def build_xlm_roberta_cross_encoder(arch: Any, dims: BertDims, out_dir: Path) -> int:
    """What `BAAI/bge-reranker-v2-m3` ships, small: an XLMRobertaForSequenceClassification
    config with one label, the encoder under `roberta.` (no pooler), RoBERTa's head
    (`classifier.dense`, `classifier.out_proj`), and a tokenizer pairing two texts as
    `<s> A </s></s> B </s>` (pad id 1, positions offset past it, one token type). The tokenizer
    is a WordPiece one in tokenizer.json (read as PreTrainedTokenizerFast): transformers'
    XLMRobertaTokenizer itself insists on a Unigram model."""
    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=dims.vocab, special_tokens=list(XLM_ROBERTA_SPECIAL), show_progress=False
    )
    tok.train_from_iterator(stdlib_corpus(max(1 << 20, 256 * dims.vocab)), trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok.save(str(out_dir / "tokenizer.json"))
    write_json(
        out_dir / "tokenizer_config.json",
        {
            "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
            "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": dims.max_positions,
        },
    )  # fmt: skip
    positions = dims.max_positions + 2  # RoBERTa's positions start past the padding id
    config = bert_config(dims)
    config.update(
        architectures=["XLMRobertaForSequenceClassification"], model_type="xlm_roberta",
        max_position_embeddings=positions, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        type_vocab_size=1, layer_norm_eps=1e-5, id2label={"0": "LABEL_0"},
        label2id={"LABEL_0": 0},
    )  # fmt: skip
    write_json(out_dir / "config.json", config)
    weights = {
        "roberta." + k: v
        for k, v in bert_weights(replace(dims, max_positions=positions)).items()
        if not k.startswith("pooler.")
    }
    weights["roberta.embeddings.token_type_embeddings.weight"] = _tensor(
        "token_type", (1, dims.hidden), "normal"
    )
    h = dims.hidden
    weights["classifier.dense.weight"] = _tensor("classifier.dense.weight", (h, h), "linear")
    weights["classifier.dense.bias"] = np.zeros((h,), dtype=np.float32)
    weights["classifier.out_proj.weight"] = _tensor("classifier.out_proj", (1, h), "normal")
    weights["classifier.out_proj.bias"] = np.full((1,), -0.1, dtype=np.float32)
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(w.size for w in weights.values())
