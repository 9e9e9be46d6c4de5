"""LoRA adapters loaded at run time (worker/text/adapters/): requests of several adapters and
of the base model, in one batch, each equal `mlx_lm.load(base, adapter_path=...)` (or the base
model) called directly, greedy, token for token."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from functools import cache

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm import load
from mlx_lm.sample_utils import make_sampler

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Delta, FinishReason, Submit
from tests.support.direct import stream_generate
from worker.cache.prefix_cache import PrefixCache
from worker.text.adapters.files import AdapterError
from worker.text.adapters.layer import AdaptedLinear
from worker.text.adapters.registry import Adapters
from worker.text.batch_engine import BatchTextEngine
from worker.text.model import load_text_model
from worker.text.prefill_pacing import PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings
from worker.text.solo_engine import SoloTextEngine
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.adapter import ensure_lora_adapter

PROMPTS = {
    "fib": "def fib(n):",
    "sea": "Write a poem about the sea and the sky, " * 6,
    "os": "import os\n",
    "cls": "class A:\n    pass\n" * 12,
}


@pytest.fixture(scope="module")
def base() -> str:
    return str(ensure_checkpoint("qwen3"))


@pytest.fixture(scope="module")
def paths(base) -> dict[str, str | None]:
    return {
        "base": None,
        "sql": str(ensure_lora_adapter(base)),
        "poet": str(ensure_lora_adapter(base, seed=11)),
    }


@pytest.fixture()
def text_model(base, paths):
    """A fresh model (adapters change its layers) with both adapters loaded."""
    model = load_text_model(base)
    model = replace(model, adapters=Adapters(model.model))
    for name in ("sql", "poet"):
        model.adapters.load(name, paths[name])
    return model


@cache
def _direct_model(base: str, adapter: str | None):
    return load(base, adapter_path=adapter)


def direct(base: str, adapter: str | None, prompt: str, max_tokens: int) -> list[int]:
    model, tokenizer = _direct_model(base, adapter)
    steps = stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    )
    return [step.token for step in steps]


def submit(request_id: str, prompt: str, adapter: str | None, max_tokens: int = 12) -> Submit:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    return Submit(request_id, CompleteInputs(prompt, params), True, adapter=adapter)


def drive(engine, submits: list[Submit], joining: list[Submit] = (), after: int = 3) -> dict:
    tokens: dict[str, list[int]] = {}
    ends: dict[str, Delta] = {}

    def admit(batch):
        for s in batch:
            delta = engine.admit(s)
            assert delta.finish_reason is None, delta
            tokens[s.request_id] = []

    admit(submits)
    steps = 0
    while engine.active_ids():
        steps += 1
        if steps == after:
            admit(joining)
        for delta in engine.step():
            tokens.setdefault(delta.request_id, []).extend(delta.token_ids)
            if delta.finish_reason is not None:
                ends[delta.request_id] = delta
        assert steps < 500
    return {"tokens": tokens, "ends": ends}


def batch_engine(text_model, paced: bool = False, prefix=None) -> BatchTextEngine:
    settings = GenerationSettings(prefill_step_size=16)
    pacer = PrefillPacer(16, ratio=0.7) if paced else None
    return BatchTextEngine(text_model, settings, 8, PrefixReuse(prefix), pacer)


@pytest.mark.parametrize("paced", [False, True], ids=["unpaced", "paced"])
def test_one_batch_of_two_adapters_and_the_base_model_equals_each_direct_run(
    text_model, base, paths, paced
):
    engine = batch_engine(text_model, paced)
    first = [
        submit("fib-sql", PROMPTS["fib"], "sql", 14),
        submit("sea-base", PROMPTS["sea"], None, 10),
        submit("os-poet", PROMPTS["os"], "poet", 12),
    ]
    joining = [
        submit("cls-sql", PROMPTS["cls"], "sql", 8),
        submit("fib-base", PROMPTS["fib"], None, 9),
    ]
    run = drive(engine, first, joining)
    for s in first + joining:
        name = s.request_id.split("-")[1]
        prompt = PROMPTS[s.request_id.split("-")[0]]
        expected = direct(base, paths[name], prompt, s.inputs.sampling.max_tokens)
        assert run["tokens"][s.request_id] == expected, s.request_id
        assert run["ends"][s.request_id].finish_reason == FinishReason.LENGTH
    # The adapters change the output: the same prompt differs under each.
    assert len({tuple(direct(base, paths[n], PROMPTS["fib"], 14)) for n in paths}) == 3


def test_the_batch_1_engine_runs_a_request_under_its_adapter(text_model, base, paths):
    engine = SoloTextEngine(text_model, GenerationSettings(prefill_step_size=16))
    submits = [submit("a", PROMPTS["sea"], "poet", 10), submit("b", PROMPTS["sea"], None, 10)]
    run = drive(engine, submits)
    assert run["tokens"]["a"] == direct(base, paths["poet"], PROMPTS["sea"], 10)
    assert run["tokens"]["b"] == direct(base, None, PROMPTS["sea"], 10)


def test_an_adapter_unloaded_mid_request_serves_that_request_to_its_end(text_model, base, paths):
    engine = batch_engine(text_model)
    engine.admit(submit("a", PROMPTS["fib"], "sql", 16))
    tokens = []
    for _ in range(4):
        tokens += [t for d in engine.step() for t in d.token_ids]
    text_model.adapters.unload("sql")
    text_model.adapters.collect(engine.adapter_slots())
    refused = engine.admit(submit("b", PROMPTS["fib"], "sql"))
    assert refused.finish_reason == FinishReason.ERROR
    assert "'sql' is not loaded" in refused.error.message
    while engine.active_ids():
        tokens += [t for d in engine.step() for t in d.token_ids]
    assert tokens == direct(base, paths["sql"], PROMPTS["fib"], 16)
    assert not text_model.adapters.pending  # its weights went once the request ended
    layers = [m for _, m in text_model.model.named_modules() if isinstance(m, AdaptedLinear)]
    assert layers and all(list(layer._adapters.by_slot) == [2] for layer in layers)


def test_a_request_under_an_adapter_neither_reuses_nor_fills_the_prefix_cache(text_model, base):
    engine = batch_engine(text_model, prefix=PrefixCache(1 << 30, "test"))
    drive(engine, [submit("a", PROMPTS["cls"], "sql", 4)])
    assert engine._prefix.cache.stats()["entries"] == 0
    drive(engine, [submit("b", PROMPTS["cls"], None, 4)])
    run = drive(engine, [submit("c", PROMPTS["cls"], "sql", 4)])
    assert run["ends"]["c"].usage.cached_tokens == 0


def test_an_unknown_adapter_is_a_bad_request(text_model):
    delta = batch_engine(text_model).admit(submit("a", "hi", "nope"))
    assert delta.finish_reason == FinishReason.ERROR
    assert "'nope' is not loaded" in delta.error.message


def _copy(source: str, tmp_path, config: dict | None = None, weights: dict | None = None) -> str:
    target = tmp_path / "adapter"
    shutil.copytree(source, target)
    if config is not None:
        (target / "adapter_config.json").write_text(json.dumps(config))
    if weights is not None:
        mx.save_safetensors(str(target / "adapters.safetensors"), weights)
    return str(target)


def _weights(path: str) -> dict:
    return dict(mx.load(f"{path}/adapters.safetensors"))


@pytest.mark.parametrize(
    "case, words",
    [
        ("missing", "is not a LoRA adapter directory"),
        ("dora", "is a 'dora' fine-tune"),
        ("no_scale", "no numeric lora_parameters.scale"),
        ("half", "only half of"),
        ("not_lora", "which is not a LoRA weight"),
        ("not_linear", "which is not a linear layer of this model"),
        ("other_base", "it was trained on another base model"),
        ("taken", "is loaded already"),
    ],
)
def test_an_adapter_that_cannot_be_served_is_refused_naming_why(
    text_model, paths, tmp_path, case, words
):
    sql = paths["sql"]
    config = json.loads(open(f"{sql}/adapter_config.json").read())
    weights = _weights(sql)
    key = next(k for k in weights if k.endswith("lora_a"))
    name, path = "new", sql
    if case == "missing":
        path = str(tmp_path / "nothing")
    elif case == "dora":
        path = _copy(sql, tmp_path, {**config, "fine_tune_type": "dora"})
    elif case == "no_scale":
        path = _copy(sql, tmp_path, {**config, "lora_parameters": {"rank": 4}})
    elif case == "half":
        path = _copy(sql, tmp_path, weights={k: v for k, v in weights.items() if k != key})
    elif case == "not_lora":
        path = _copy(sql, tmp_path, weights={**weights, "model.norm.weight": mx.ones(4)})
    elif case == "not_linear":
        moved = {k.replace("self_attn", "input_layernorm", 1): v for k, v in weights.items()}
        path = _copy(sql, tmp_path, weights=moved)
    elif case == "other_base":
        grown = {
            k: mx.concatenate([v, v]) if k.endswith("lora_a") else v for k, v in weights.items()
        }
        path = _copy(sql, tmp_path, weights=grown)
    else:
        name = "sql"
    before = text_model.adapters.loaded()
    with pytest.raises(AdapterError, match=words):
        text_model.adapters.load(name, path)
    assert text_model.adapters.loaded() == before


def test_at_most_max_loras_adapters_are_loaded(base, paths):
    model = load_text_model(base)
    adapters = Adapters(model.model, max_loras=1)
    adapters.load("sql", paths["sql"])
    with pytest.raises(AdapterError, match="--max-loras"):
        adapters.load("poet", paths["poet"])
    adapters.unload("sql")
    adapters.load("poet", paths["poet"])
    assert adapters.loaded() == [("poet", paths["poet"])]


def test_loading_in_place_swaps_in_one_step_and_running_requests_keep_the_old(
    text_model, base, paths, tmp_path
):
    engine = batch_engine(text_model)
    engine.admit(submit("old", PROMPTS["fib"], "sql", 12))
    tokens = [t for d in engine.step() for t in d.token_ids]
    with pytest.raises(AdapterError):  # a bad replacement leaves the old one serving
        text_model.adapters.load("sql", str(tmp_path / "nothing"), replace=True)
    assert ("sql", paths["sql"]) in text_model.adapters.loaded()
    text_model.adapters.load("sql", paths["poet"], replace=True)
    assert ("sql", paths["poet"]) in text_model.adapters.loaded()
    run = drive(engine, [submit("new", PROMPTS["fib"], "sql", 12)])
    assert tokens + run["tokens"]["old"] == direct(base, paths["sql"], PROMPTS["fib"], 12)
    assert run["tokens"]["new"] == direct(base, paths["poet"], PROMPTS["fib"], 12)
    assert not text_model.adapters.pending  # the old weights went with its last request


def test_an_unloaded_adapters_weights_go_when_its_last_request_is_aborted(text_model):
    engine = batch_engine(text_model)
    engine.admit(submit("a", PROMPTS["sea"], "poet", 40))
    engine.step()
    text_model.adapters.unload("poet")
    engine.step()
    assert text_model.adapters.pending
    engine.abort(["a"])
    assert not text_model.adapters.pending


class _Flattening(nn.Module):
    """A model whose `gate` sees its rows flattened into one (as a MoE router does)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.gate = nn.Linear(8, 4)

    def __call__(self, tokens: mx.array, cache=None) -> mx.array:
        h = self.embed(tokens)
        return self.gate(h.reshape(-1, 8))


def _gate_adapter(tmp_path) -> str:
    """An adapter of the toy models' `gate` layer."""
    adapter = tmp_path / "gate"
    adapter.mkdir(exist_ok=True)
    config = {"fine_tune_type": "lora", "num_layers": 1, "lora_parameters": {"rank": 2, "scale": 1}}
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    weights = {"gate.lora_a": mx.ones((8, 2)), "gate.lora_b": mx.ones((2, 4))}
    mx.save_safetensors(str(adapter / "adapters.safetensors"), weights)
    return str(adapter)


def test_an_adapter_on_a_layer_that_flattens_its_rows_is_refused(tmp_path):
    adapters = Adapters(_Flattening())
    with pytest.raises(AdapterError, match="cannot be served per request"):
        adapters.load("gate", _gate_adapter(tmp_path))
    assert adapters.loaded() == [] and not adapters.pending


def test_a_load_refused_by_its_probe_leaves_other_adapters_weights(tmp_path):
    adapter = _gate_adapter(tmp_path)
    adapters = Adapters(_Flattening(), mixes_rows=False)
    adapters.load("x", adapter)
    adapters.unload("x")  # a request still holds it: pending
    layer = adapters._layers["gate"]
    adapters.mixes_rows = True
    with pytest.raises(AdapterError, match="cannot be served per request"):
        adapters.load("y", adapter)
    assert adapters.pending and list(layer._adapters.by_slot) == [1]


class _Transposing(_Flattening):
    """A model whose `gate` sees its tokens before its rows."""

    def __call__(self, tokens: mx.array, cache=None) -> mx.array:
        return self.gate(self.embed(tokens).transpose(1, 0, 2)).transpose(1, 0, 2)


@pytest.mark.parametrize("model", [_Flattening, _Transposing])
def test_the_batch_1_engine_takes_what_a_mixed_batch_refuses(tmp_path, model):
    adapter = tmp_path / "gate"
    adapter.mkdir()
    config = {
        "fine_tune_type": "lora",
        "num_layers": 1,
        "lora_parameters": {"rank": 2, "scale": 1.0},
    }
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    weights = {"gate.lora_a": mx.ones((8, 2)), "gate.lora_b": mx.ones((2, 4))}
    mx.save_safetensors(str(adapter / "adapters.safetensors"), weights)
    with pytest.raises(AdapterError, match="cannot be served per request"):
        Adapters(model()).load("gate", str(adapter))
    alone = Adapters(model(), mixes_rows=False)
    alone.load("gate", str(adapter))
    assert [name for name, _ in alone.loaded()] == ["gate"]
