"""What an embedding checkpoint says about itself, read from its JSON files (no MLX here).

A sentence-transformers folder describes its pipeline in `modules.json` (Transformer, then
Pooling, then optionally Normalize), the pooling in `1_Pooling/config.json` (one
`pooling_mode_*` flag, or `pooling_mode`) and the longest input in `sentence_bert_config.json`
(`max_seq_length`). Without those files: mean pooling and unit vectors for an encoder (what
mlx-embeddings' `text_embeds` gives), last-token pooling and unit vectors for a decoder.
Matryoshka training is read from config.json as vLLM reads it (`is_matryoshka`,
`matryoshka_dimensions`). Modules this server does not apply (a Dense projection, several
pooling modes at once, weighted-mean pooling) make the load fail with their name.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENCODER, DECODER = "mlx-embeddings", "mlx-lm"
POOLING_MODES = ("cls", "mean", "max", "lasttoken", "mean_sqrt_len")
# sentence-transformers' flag names -> POOLING_MODES
_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weightedmean",
}
# Text encoders: served as embedding models even without sentence-transformers files.
ENCODER_TYPES = frozenset({"bert", "xlm_roberta", "modernbert"})
# Encoders whose position ids start past the padding id (RoBERTa's layout).
_PADDED_POSITIONS = {"xlm_roberta", "roberta", "camembert"}


class CheckpointError(ValueError):
    """The checkpoint is not an embedding model this server can serve; the text says why."""


@dataclass(frozen=True)
class EmbeddingCheckpoint:
    path: str
    model_type: str
    backend: str  # ENCODER or DECODER
    pooling: str  # one of POOLING_MODES
    normalize: bool
    max_input_tokens: int
    vocab_size: int
    matryoshka: bool = False
    matryoshka_dimensions: list[int] = field(default_factory=list)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path.name}: {exc}") from exc


def is_sentence_transformers(path: str | Path) -> bool:
    """Whether the folder holds a sentence-transformers pipeline with a pooling module."""
    root = Path(path)
    if (root / "1_Pooling" / "config.json").is_file():
        return True
    modules = read_json(root / "modules.json")
    return isinstance(modules, list) and any(
        isinstance(m, dict) and str(m.get("type", "")).endswith(".Pooling") for m in modules
    )


def library_has(package: str, model_type: str) -> bool:
    """Whether `package` (mlx_embeddings, mlx_lm) has a module for `model_type`, found on
    disk without importing the package (importing mlx-embeddings pulls mlx-vlm)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    name = model_type.replace("-", "_")
    for location in spec.submodule_search_locations:
        models = Path(location) / "models"
        if (models / f"{name}.py").is_file() or (models / name / "__init__.py").is_file():
            return True
    return False


def is_embedding_checkpoint(path: str | Path) -> bool:
    """A sentence-transformers folder, or a text encoder (ENCODER_TYPES: BERT, ...)."""
    if is_sentence_transformers(path):
        return True
    config = read_json(Path(path) / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        return False
    return config["model_type"].replace("-", "_") in ENCODER_TYPES


def read_checkpoint(path: str | Path) -> EmbeddingCheckpoint:
    """The embedding pipeline of the checkpoint at `path`; CheckpointError naming the problem."""
    root = Path(path)
    config = read_json(root / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise CheckpointError(f"{root}: no config.json with a model_type")
    model_type = config["model_type"]
    modules = read_json(root / "modules.json")
    _check_modules(modules)
    pooling = _pooling(read_json(root / "1_Pooling" / "config.json"))
    backend = _backend(model_type, config, pooling)
    if pooling is None:
        pooling = "mean" if backend == ENCODER else "lasttoken"
    normalize = (
        any(str(m.get("type", "")).endswith(".Normalize") for m in modules)
        if isinstance(modules, list)
        else True
    )
    dims = config.get("matryoshka_dimensions")
    dims = sorted({int(d) for d in dims}) if isinstance(dims, list) else []
    return EmbeddingCheckpoint(
        path=str(path),
        model_type=model_type,
        backend=backend,
        pooling=pooling,
        normalize=normalize,
        max_input_tokens=_max_input_tokens(root, config),
        vocab_size=int(config.get("vocab_size") or 0),
        matryoshka=bool(config.get("is_matryoshka")) or bool(dims),
        matryoshka_dimensions=dims,
    )


def _check_modules(modules: Any) -> None:
    if not isinstance(modules, list):
        return
    for module in modules:
        kind = str(module.get("type", "")) if isinstance(module, dict) else ""
        short = kind.rsplit(".", 1)[-1]
        if short not in ("Transformer", "Pooling", "Normalize", ""):
            raise CheckpointError(
                f"modules.json: the sentence-transformers module {short} ({kind}) is not "
                "applied by this server (it applies Transformer, Pooling and Normalize)"
            )


def _pooling(config: Any) -> str | None:
    if not isinstance(config, dict):
        return None
    mode = config.get("pooling_mode")  # newer sentence-transformers write the name
    if isinstance(mode, str):
        modes = [{"mean_tokens": "mean", "cls_token": "cls"}.get(mode, mode)]
    else:
        modes = [name for flag, name in _POOLING_FLAGS.items() if config.get(flag) is True]
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise CheckpointError(
            f"1_Pooling/config.json: pooling {' + '.join(modes) or 'none'} is not supported "
            f"(one of: {', '.join(POOLING_MODES)})"
        )
    return modes[0]


def _backend(model_type: str, config: dict[str, Any], pooling: str | None) -> str:
    encoder = library_has("mlx_embeddings", model_type)
    decoder = library_has("mlx_lm", model_type) and not config.get("use_bidirectional_attention")
    if encoder and (pooling != "lasttoken" or not decoder):
        return ENCODER
    if decoder:
        return DECODER
    raise CheckpointError(
        f"model_type {model_type!r} is neither an mlx-embeddings encoder nor an mlx-lm decoder"
        + ("" if library_has("mlx_embeddings", "bert") else " (install the [embed] extra)")
    )


def _max_input_tokens(root: Path, config: dict[str, Any]) -> int:
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and config["model_type"] in _PADDED_POSITIONS:
        positions -= int(config.get("pad_token_id") or 0) + 1
    st = read_json(root / "sentence_bert_config.json")
    length = st.get("max_seq_length") if isinstance(st, dict) else None
    limits = [n for n in (positions, length) if isinstance(n, int) and n > 0]
    if not limits:
        raise CheckpointError("config.json gives no max_position_embeddings (the longest input)")
    return min(limits)


# -- rerankers -----------------------------------------------------------------------------

CROSS_ENCODER, LLM_RERANKER, EMBEDDING_COSINE = "cross-encoder", "llm-yes-no", "embedding-cosine"
# Cross-encoders whose encoder mlx-embeddings has, and the prefix of their weights' names in a
# transformers *ForSequenceClassification checkpoint (its base_model_prefix).
CROSS_ENCODER_TYPES = {"bert": "bert", "xlm_roberta": "roberta"}
ACTIVATIONS = ("sigmoid", "identity")


@dataclass(frozen=True)
class RerankCheckpoint:
    path: str
    model_type: str
    method: str  # CROSS_ENCODER or LLM_RERANKER
    max_input_tokens: int  # tokens of one pair, special tokens (and the template) included
    activation: str = "identity"  # a cross-encoder's, applied to its logit (ACTIVATIONS)


def reranker_method(path: str | Path) -> str | None:
    """CROSS_ENCODER for a `*ForSequenceClassification` checkpoint of an encoder, LLM_RERANKER
    for an mlx-lm decoder whose path names it a reranker (Qwen3-Reranker-0.6B, ...: their
    config.json is a plain causal LM), None otherwise."""
    config = read_json(Path(path) / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        return None
    architectures = config.get("architectures") or []
    if any(str(a).endswith("ForSequenceClassification") for a in architectures):
        return CROSS_ENCODER if config["model_type"] in CROSS_ENCODER_TYPES else None
    if "reranker" in str(path).lower() and library_has("mlx_lm", config["model_type"]):
        return LLM_RERANKER
    return None


def read_reranker(path: str | Path, method: str | None = None) -> RerankCheckpoint:
    """The reranker at `path` (`method` forces LLM_RERANKER for a decoder whatever its name);
    CheckpointError naming the problem."""
    root = Path(path)
    config = read_json(root / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise CheckpointError(f"{root}: no config.json with a model_type")
    model_type = config["model_type"]
    found = reranker_method(path)
    if found is None and method == LLM_RERANKER and library_has("mlx_lm", model_type):
        found = LLM_RERANKER
    if found is None:
        raise CheckpointError(
            f"{root} is not a reranker: neither a sequence-classification checkpoint of "
            f"{' / '.join(CROSS_ENCODER_TYPES)} nor an mlx-lm decoder (an LLM reranker)"
        )
    if found == LLM_RERANKER:
        positions = config.get("max_position_embeddings")
        if not isinstance(positions, int) or positions < 1:
            raise CheckpointError("config.json gives no max_position_embeddings")
        return RerankCheckpoint(str(path), model_type, LLM_RERANKER, positions)
    if not library_has("mlx_embeddings", model_type):
        raise CheckpointError(f"{root} is a cross-encoder: install the [embed] extra")
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) else int(config.get("num_labels") or 1)
    if num_labels != 1:
        raise CheckpointError(
            f"{root}: a cross-encoder with {num_labels} labels; a reranker has one (its logit)"
        )
    return RerankCheckpoint(
        str(path), model_type, CROSS_ENCODER, _max_input_tokens(root, config),
        cross_encoder_activation(config),
    )  # fmt: skip


def cross_encoder_activation(config: dict[str, Any]) -> str:
    """What sentence-transformers' CrossEncoder applies to a one-label logit: the activation
    the checkpoint names (`sentence_transformers.activation_fn`, or the older
    `sbert_ce_default_activation_function`), else Sigmoid."""
    st = config.get("sentence_transformers")
    named = st.get("activation_fn") if isinstance(st, dict) else None
    named = named or config.get("sbert_ce_default_activation_function")
    if not named:
        return "sigmoid"
    short = str(named).rsplit(".", 1)[-1].lower()
    if short not in ACTIVATIONS:
        raise CheckpointError(
            f"config.json: the cross-encoder activation {named} is not applied by this server "
            f"(it applies: Sigmoid, Identity)"
        )
    return short
