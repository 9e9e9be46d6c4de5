"""The models file: what it holds, and every way it is refused, with the line and field named."""

from __future__ import annotations

import pytest

from gateway.pool.models_file import ModelsFileError, parse_models_file

GOOD = """\
max_loaded_models: 2
memory_budget_gb: 16
idle_unload_seconds: 900
models:
  - id: chat
    path: /models/qwen3
    aliases: [gpt-4o-mini]
    pinned: true
    preload: true
    options: {max_num_seqs: 8, kv_bits: 8, tool_call_parser: auto, ssd_cache_max_gb: 4,
              prefill_interleave: 1}
  - id: voice
    path: /models/qwen3-tts
    kind: speech
    aliases: [tts-1]
  - id: coder-lora
    path: /models/qwen3-4b
    adapter: /adapters/sql
"""


def test_a_models_file_holds_the_models_and_the_limits():
    models = parse_models_file(GOOD)
    assert (models.max_loaded_models, models.memory_budget_gb, models.idle_unload_seconds) == (
        2,
        16,
        900.0,
    )
    chat, voice, coder = models.models
    assert chat.id == "chat" and chat.aliases == ("gpt-4o-mini",) and chat.pinned and chat.preload
    assert chat.options == {
        "max_num_seqs": 8, "kv_bits": 8, "tool_call_parser": "auto", "ssd_cache_max_gb": 4.0,
        "prefill_interleave": 1.0,
    }  # fmt: skip
    assert voice.kind == "speech" and not voice.pinned and chat.kind == "auto"
    assert coder.adapter == "/adapters/sql"


def test_a_remote_entry_names_a_worker_host_instead_of_a_path():
    models = parse_models_file(
        "models:\n  - id: big\n    remote: tcp://gpu-box:7070\n    kind: chat\n"
        "    aliases: [gpt-4o]\n    options: {max_num_seqs: 4, heartbeat_timeout: 5}\n"
        "  - {id: local, path: /a}\n"
    )
    big, local = models.models
    assert big.remote == "tcp://gpu-box:7070" and big.path == "" and big.kind == "chat"
    assert big.options == {"max_num_seqs": 4, "heartbeat_timeout": 5.0}
    assert local.remote is None and local.path == "/a"


def test_without_limits_every_model_may_be_loaded_and_none_is_unloaded_for_idling():
    models = parse_models_file("models:\n  - {id: a, path: /a}\n  - {id: b, path: /b}\n")
    assert models.max_loaded_models == 2 and models.idle_unload_seconds == 0
    assert models.memory_budget_gb is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "f.yaml: models: the file is empty"),
        ("models: [\n", "f.yaml:2: not valid YAML"),
        ("max_loaded_models: 2\n", "f.yaml:1: models: is required"),
        ("models: []\n", "f.yaml:1: models: must be a non-empty list"),
        ("modles:\n  - {id: a, path: /a}\n", "f.yaml:1: modles: unknown field"),
        ("models:\n  - {id: a}\n", "f.yaml:2: models[0].path: is required"),
        ("models:\n  - id: a\n    path: /a\n    kind: movie\n",
         "f.yaml:4: models[0].kind: must be one of chat, speech, transcription, embed, rerank, "
         "image, video, auto"),
        ("models:\n  - {id: a, path: /a}\n  - {id: b, path: /b, aliases: [a]}\n",
         "f.yaml:3: models[1]: the name 'a' is also a's"),
        ("models:\n  - id: a\n    path: /a\n    options: {max_num_seqs: many}\n",
         "f.yaml:4: models[0].options.max_num_seqs: must be an integer"),
        ("models:\n  - id: a\n    path: /a\n    options: {speech_model: /t}\n",
         "f.yaml:4: models[0].options.speech_model: unknown field"),
        ("models:\n  - id: a\n    path: /a\n    pinned: yes please\n",
         "f.yaml:4: models[0].pinned: must be true or false"),
        ("max_loaded_models: 0\nmodels:\n  - {id: a, path: /a}\n",
         "f.yaml:1: max_loaded_models: must be an integer >= 1"),
        ("memory_budget_gb: 0\nmodels:\n  - {id: a, path: /a}\n",
         "f.yaml:1: memory_budget_gb: must be > 0"),
        ("max_loaded_models: 1\nmodels:\n  - {id: a, path: /a, pinned: true}\n"
         "  - {id: b, path: /b, pinned: true}\n",
         "f.yaml:1: max_loaded_models: 2 models are pinned but only 1 may be loaded at once"),
        ("models:\n  - {id: a, path: /a, kind: speech, adapter: /x}\n",
         "f.yaml:2: models[0].adapter: only chat models take adapters"),
        ("models:\n  - {id: a, path: /a, remote: 'tcp://h:1'}\n",
         "f.yaml:2: models[0].path: does not go with remote"),
        ("models:\n  - {id: a, remote: 'tcp://h:1', adapter: /x}\n",
         "f.yaml:2: models[0].adapter: does not go with remote"),
        ("models:\n  - {id: a, remote: 'http://h:1'}\n",
         "f.yaml:2: models[0].remote: 'http://h:1' is not tcp://HOST:PORT"),
        ("models:\n  - {id: a, remote: 'tcp://h:65535'}\n",
         "f.yaml:2: models[0].remote: 'tcp://h:65535': the port must be 1-65534"),
        ("models:\n  - id: a\n    remote: tcp://h:7070\n    options: {kv_bits: 8}\n",
         "f.yaml:4: models[0].options.kv_bits: a worker flag: give it to `vllm-omni-mlx worker`"),
        ("models:\n  - {id: a, remote: ''}\n",
         "f.yaml:2: models[0].remote: must be a non-empty string"),
        ("models:\n  - {id: !foo bar, path: /a}\n",
         "f.yaml:2: models[0].id: cannot be read (could not determine a constructor"),
        ("models:\n  - {id: a, path: /a, options: {max_kv_size: 1.5}}\n",
         "f.yaml:2: models[0].options.max_kv_size: must be an integer"),
        ("models:\n  - {id: a, path: /a, options: {prefill_interleave: fast}}\n",
         "f.yaml:2: models[0].options.prefill_interleave: must be a number"),
        ("models:\n  - {id: a, path: /a, options: {max_num_seqs: 0}}\n",
         "f.yaml:2: models[0].options.max_num_seqs: must be >= 1"),
        ("models:\n  - {id: a, path: /a, options: {queue_timeout: -1}}\n",
         "f.yaml:2: models[0].options.queue_timeout: must be >= 0"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_naming_the_line_and_the_field(text, expected):
    with pytest.raises(ModelsFileError) as caught:
        parse_models_file(text, "f.yaml")
    assert str(caught.value).startswith(expected), str(caught.value)


def test_the_older_kind_names_tts_and_asr_are_read_as_speech_and_transcription():
    models = parse_models_file(
        "models:\n  - {id: a, path: /a, kind: tts}\n  - {id: b, path: /b, kind: asr}\n"
    )
    assert [m.kind for m in models.models] == ["speech", "transcription"]
