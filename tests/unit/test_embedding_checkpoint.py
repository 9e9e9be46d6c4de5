"""What an embedding checkpoint says about itself (worker/embedding/checkpoint.py): the
sentence-transformers pooling and normalisation, the longest input, Matryoshka, the backend,
and which checkpoints are embedding models at all. JSON only: no weights are loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.embedding.checkpoint import (
    DECODER,
    ENCODER,
    CheckpointError,
    is_embedding_checkpoint,
    read_checkpoint,
)

BERT = {"model_type": "bert", "max_position_embeddings": 512, "vocab_size": 100}


def folder(tmp_path: Path, config: dict, **files: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    for name, content in files.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    return tmp_path


MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}  # fmt: skip


def test_minilm_layout_pools_the_mean_normalises_and_stops_at_max_seq_length(tmp_path):
    path = folder(
        tmp_path, BERT,
        **{"modules.json": [*MODULES, NORMALIZE],
           "1_Pooling__config.json": {"pooling_mode_mean_tokens": True,
                                      "pooling_mode_cls_token": False},
           "sentence_bert_config.json": {"max_seq_length": 256}},
    )  # fmt: skip
    checkpoint = read_checkpoint(path)
    assert (checkpoint.backend, checkpoint.pooling, checkpoint.normalize) == (ENCODER, "mean", True)
    assert checkpoint.max_input_tokens == 256 and not checkpoint.matryoshka


def test_without_a_normalize_module_vectors_are_not_normalised(tmp_path):
    path = folder(
        tmp_path, BERT,
        **{"modules.json": MODULES, "1_Pooling__config.json": {"pooling_mode_cls_token": True}},
    )  # fmt: skip
    checkpoint = read_checkpoint(path)
    assert (checkpoint.pooling, checkpoint.normalize) == ("cls", False)
    assert checkpoint.max_input_tokens == 512


def test_a_bare_encoder_pools_the_mean_and_normalises_like_mlx_embeddings(tmp_path):
    checkpoint = read_checkpoint(folder(tmp_path, BERT))
    assert (checkpoint.pooling, checkpoint.normalize) == ("mean", True)
    assert is_embedding_checkpoint(tmp_path)


def test_roberta_positions_leave_room_for_the_padding_offset(tmp_path):
    config = {"model_type": "xlm_roberta", "max_position_embeddings": 514, "pad_token_id": 1}
    assert read_checkpoint(folder(tmp_path, config)).max_input_tokens == 512


def test_a_last_token_decoder_is_served_by_mlx_lm(tmp_path):
    config = {"model_type": "qwen3", "max_position_embeddings": 32768, "vocab_size": 10}
    path = folder(tmp_path, config, **{"1_Pooling__config.json": {"pooling_mode_lasttoken": True}})
    checkpoint = read_checkpoint(path)
    assert (checkpoint.backend, checkpoint.pooling) == (DECODER, "lasttoken")
    assert is_embedding_checkpoint(path)


def test_a_chat_decoder_is_not_an_embedding_checkpoint(tmp_path):
    assert not is_embedding_checkpoint(folder(tmp_path, {"model_type": "qwen3"}))


def test_matryoshka_is_read_as_vllm_reads_it(tmp_path):
    config = {**BERT, "is_matryoshka": True, "matryoshka_dimensions": [256, 64, 128]}
    checkpoint = read_checkpoint(folder(tmp_path, config))
    assert checkpoint.matryoshka and checkpoint.matryoshka_dimensions == [64, 128, 256]


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ({"1_Pooling__config.json": {"pooling_mode_mean_tokens": True,
                                     "pooling_mode_max_tokens": True}}, r"mean \+ max"),
        ({"1_Pooling__config.json": {"pooling_mode_weightedmean_tokens": True}}, "weightedmean"),
        ({"modules.json": [*MODULES, {"idx": 2, "name": "2", "path": "2_Dense",
                                      "type": "sentence_transformers.models.Dense"}]}, "Dense"),
    ],
)  # fmt: skip
def test_a_pipeline_this_server_does_not_apply_fails_by_name(tmp_path, files, named):
    with pytest.raises(CheckpointError, match=named):
        read_checkpoint(folder(tmp_path, BERT, **files))
