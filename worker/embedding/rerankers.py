"""Rerankers: one relevance score per (query, document) pair, from one padded pass.

A cross-encoder (a transformers `BertForSequenceClassification` / `XLMRobertaFor...`
checkpoint) runs mlx-embeddings' encoder on the pair as one input (`[CLS] query [SEP] document
[SEP]`, the document's tokens of segment 1, as the tokenizer pairs them) with the padding
masked, then the checkpoint's classification head: BERT's pooler (tanh of a dense layer on the
[CLS] state) and `classifier`, or RoBERTa's head (`classifier.dense`, tanh,
`classifier.out_proj`) on the first state. The score is the logit through the activation
sentence-transformers' CrossEncoder applies (checkpoint.cross_encoder_activation).

An LLM reranker (Qwen3-Reranker style) is a causal LM on mlx-lm asked, under its documented
prompt, whether the document meets the query: the score is softmax(logit("yes"),
logit("no"))[yes] at the last prompt token. Rows are right-padded (causal attention never sees
the padding); only the last real token's state goes through the LM head. Runs on the MLX thread.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

from worker.embedding.checkpoint import (
    CROSS_ENCODER,
    CROSS_ENCODER_TYPES,
    LLM_RERANKER,
    RerankCheckpoint,
    read_reranker,
)
from worker.embedding.inputs import kept_tokens
from worker.runtime.errors import bad_request

# Qwen3-Reranker's prompt (its model card): a system turn that asks for "yes" or "no", the
# pair as <Instruct> / <Query> / <Document>, and an empty think block before the answer.
QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    'and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
QWEN3_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def qwen3_pair_text(query: str, document: str, instruction: str = QWEN3_INSTRUCTION) -> str:
    return f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"


Rows = list[list[int]]


@dataclass
class CrossEncoderModel:
    checkpoint: RerankCheckpoint
    model: Any  # mlx-embeddings' encoder
    head: dict[str, mx.array]  # the classification head's weights, by their names
    tokenizer: Any
    pad_id: int

    def pair_rows(
        self, pairs: list[tuple[str, str]], truncate: int | None
    ) -> tuple[Rows, Rows | None]:
        """Token ids and token types of each pair, as the tokenizer pairs two texts."""
        options: dict[str, Any] = {"add_special_tokens": True, "return_token_type_ids": True}
        keep = kept_tokens(truncate, self.checkpoint.max_input_tokens)
        if keep is not None:
            options.update(truncation="longest_first", max_length=keep)
        encoded = self.tokenizer([q for q, _ in pairs], [d for _, d in pairs], **options)
        rows = [list(r) for r in encoded["input_ids"]]
        types = encoded.get("token_type_ids")
        return rows, [list(t) for t in types] if types is not None else None

    def score(self, rows: Rows, types: Rows | None) -> mx.array:
        ids, mask = _padded(rows, self.pad_id)
        kwargs: dict[str, Any] = {"attention_mask": mask}
        if types is not None:
            kwargs["token_type_ids"] = _padded(types, 0)[0]
        out = self.model(ids, **kwargs)
        head = self.head
        if self.checkpoint.model_type == "bert":
            logits = out.pooler_output @ head["classifier.weight"].T + head["classifier.bias"]
        else:  # RoBERTa's head: dense + tanh on the first state, then the projection
            first = out.last_hidden_state[:, 0]
            hidden = mx.tanh(
                first @ head["classifier.dense.weight"].T + head["classifier.dense.bias"]
            )
            logits = (
                hidden @ head["classifier.out_proj.weight"].T + head["classifier.out_proj.bias"]
            )
        logits = logits.astype(mx.float32)
        return mx.sigmoid(logits) if self.checkpoint.activation == "sigmoid" else logits


@dataclass
class LLMRerankerModel:
    checkpoint: RerankCheckpoint
    model: Any  # mlx-lm's model
    tokenizer: Any
    yes_id: int
    no_id: int
    prefix: list[int]
    suffix: list[int]

    def pair_rows(self, pairs: list[tuple[str, str]], truncate: int | None) -> tuple[Rows, None]:
        """The prompt of each pair: prefix + the pair's text (cut to fit `truncate`) + suffix."""
        keep = kept_tokens(truncate, self.checkpoint.max_input_tokens)
        room = None if keep is None else keep - len(self.prefix) - len(self.suffix)
        if room is not None and room < 1:
            raise bad_request(
                f"`truncate_prompt_tokens` {keep} leaves no room for the pair: this model's "
                f"prompt template takes {len(self.prefix) + len(self.suffix)} tokens"
            )
        texts = [qwen3_pair_text(q, d) for q, d in pairs]
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        rows = [self.prefix + list(r)[:room] + self.suffix for r in encoded]
        return rows, None

    def score(self, rows: Rows, types: Rows | None) -> mx.array:
        ids, mask = _padded(rows, 0)
        hidden = self.model.model(ids)
        last = mask.sum(axis=1) - 1
        states = mx.take_along_axis(hidden, last[:, None, None], axis=1)  # (rows, 1, width)
        head = getattr(self.model, "lm_head", None)
        logits = (
            head(states) if head is not None else self.model.model.embed_tokens.as_linear(states)
        )
        pair = logits[:, 0][:, mx.array([self.no_id, self.yes_id])].astype(mx.float32)
        return mx.softmax(pair, axis=-1)[:, 1:]


RerankModel = CrossEncoderModel | LLMRerankerModel


def _padded(rows: Rows, pad: int) -> tuple[mx.array, mx.array]:
    width = max(len(r) for r in rows)
    ids = mx.array([r + [pad] * (width - len(r)) for r in rows], dtype=mx.int32)
    mask = mx.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=mx.int32)
    return ids, mask


def load_reranker(path: str, method: str | None = None) -> RerankModel:
    """Loads the reranker at `path` (raises naming the problem); one tiny pass warms it up."""
    checkpoint = read_reranker(path, method)
    model = (
        _load_llm_reranker(path, checkpoint)
        if checkpoint.method == LLM_RERANKER
        else _load_cross_encoder(path, checkpoint)
    )
    rows, types = model.pair_rows([("a", "b")], -1)
    mx.eval(model.score(rows, types))
    return model


def _load_cross_encoder(path: str, checkpoint: RerankCheckpoint) -> CrossEncoderModel:
    assert checkpoint.method == CROSS_ENCODER
    try:
        from mlx_embeddings.utils import _get_classes, load_config
    except ImportError as exc:
        raise ValueError(f"{path} is a cross-encoder: install the [embed] extra") from exc
    from transformers import AutoTokenizer

    root = Path(path)
    config = load_config(root)
    if checkpoint.model_type == "xlm_roberta":
        config["add_pooling_layer"] = False  # RoBERTa's classification head has its own dense
    model_class, args_class, _, _ = _get_classes(config=config)
    model = model_class(args_class.from_dict(config))
    prefix = CROSS_ENCODER_TYPES[checkpoint.model_type] + "."
    weights: dict[str, mx.array] = {}
    for file in sorted(glob.glob(str(root / "model*.safetensors"))):
        weights.update(mx.load(file))
    if not weights:
        raise ValueError(f"{path}: no model*.safetensors")
    head = {k: v for k, v in weights.items() if k.startswith("classifier.")}
    encoder = {k.removeprefix(prefix): v for k, v in weights.items() if k not in head}
    if hasattr(model, "sanitize"):
        encoder = model.sanitize(encoder)
    wanted = (
        {"classifier.weight", "classifier.bias"}
        if checkpoint.model_type == "bert"
        else {f"classifier.{n}.{p}" for n in ("dense", "out_proj") for p in ("weight", "bias")}
    )
    if not wanted <= set(head):
        raise ValueError(f"{path}: the classification head lacks {sorted(wanted - set(head))}")
    model.load_weights(list(encoder.items()))  # strict: every encoder weight, nothing else
    model.eval()
    mx.eval(model.parameters(), list(head.values()))
    tokenizer = AutoTokenizer.from_pretrained(path)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return CrossEncoderModel(checkpoint, model, head, tokenizer, int(pad))


def _load_llm_reranker(path: str, checkpoint: RerankCheckpoint) -> LLMRerankerModel:
    from mlx_lm import load

    model, wrapper = load(path)
    tokenizer = getattr(wrapper, "_tokenizer", wrapper)
    ids = {}
    for word in ("yes", "no"):
        found = tokenizer.convert_tokens_to_ids(word)
        if not isinstance(found, int) or found == tokenizer.unk_token_id:
            raise ValueError(f"{path}: an LLM reranker needs {word!r} as one token")
        ids[word] = found
    if not hasattr(model, "model"):
        raise ValueError(f"{path}: the mlx-lm model has no backbone (`model.model`)")
    prefix = tokenizer.encode(QWEN3_PREFIX, add_special_tokens=False)
    suffix = tokenizer.encode(QWEN3_SUFFIX, add_special_tokens=False)
    return LLMRerankerModel(checkpoint, model, tokenizer, ids["yes"], ids["no"], prefix, suffix)
