"""Follow-up turns on mlx-vlm reuse their conversation's KV cache, and only their own.

The engine is built directly on the tiny Qwen2-VL; every reuse is checked against the same
request on an engine without any prefix cache (greedy tokens must be equal).
"""

from __future__ import annotations

import os

import pytest

from protocol.messages import FinishReason
from tests.support.vision import mlx_vlm_message, png, run_all
from tests.support.vision import vision_submit as submit
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_vlm")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worker.vision.engine import VisionEngine, make_text_prefix_caches  # noqa: E402
from worker.vision.model import load_vision_model  # noqa: E402
from worker.vision.turns import ConversationCache, media_key  # noqa: E402

BUDGET = 64 << 20
QUESTION = " ".join(["describe the picture in every detail"] * 3)


@pytest.fixture(scope="module")
def vm():
    return load_vision_model(str(ensure_checkpoint("qwen2_vl")))


def cached_engine(vm, budget: int = BUDGET) -> VisionEngine:
    apc, text_prefix = make_text_prefix_caches(vm, budget)
    return VisionEngine(vm, 2048, apc, turns=ConversationCache(budget), text_prefix=text_prefix)


def plain_engine(vm) -> VisionEngine:
    return VisionEngine(vm, 2048, None)


def follow_up(first_answer: str, text: str = "and what else is there?") -> list[dict]:
    return [
        mlx_vlm_message(QUESTION),
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": text},
    ]


def test_media_key_depends_on_content_and_order():
    a, b = png(1), png(2)
    assert media_key([a, b]) == media_key([bytes(a), bytes(b)])
    assert media_key([a, b]) != media_key([b, a])
    assert media_key([a]) != media_key([b])


def test_a_follow_up_turn_prefills_only_its_new_text(vm):
    engine, plain = cached_engine(vm), plain_engine(vm)
    first = run_all(engine, submit("t1", [png(5)], [mlx_vlm_message(QUESTION)]))["t1"]
    assert first["end"].usage.cached_tokens == 0
    second = run_all(engine, submit("t2", [png(5)], follow_up(first["text"])))["t2"]
    reference = run_all(plain, submit("r2", [png(5)], follow_up(first["text"])))["r2"]
    usage = second["end"].usage
    image_tokens = 0 < usage.cached_tokens < usage.prompt_tokens
    assert image_tokens and engine.turns.hits == 1
    assert second["tokens"] == reference["tokens"]


def test_a_follow_up_about_another_image_shares_nothing(vm):
    engine, plain = cached_engine(vm), plain_engine(vm)
    first = run_all(engine, submit("t1", [png(5)], [mlx_vlm_message(QUESTION)]))["t1"]
    other = run_all(engine, submit("t2", [png(6)], follow_up(first["text"])))["t2"]
    reference = run_all(plain, submit("r2", [png(6)], follow_up(first["text"])))["r2"]
    assert other["end"].usage.cached_tokens == 0
    assert other["tokens"] == reference["tokens"]


def test_a_text_only_follow_up_reuses_the_prefix_cache(vm):
    engine, plain = cached_engine(vm), plain_engine(vm)
    turn1 = [{"role": "user", "content": QUESTION}]
    first = run_all(engine, submit("t1", [], turn1))["t1"]
    turn2 = turn1 + [
        {"role": "assistant", "content": first["text"]},
        {"role": "user", "content": "and then?"},
    ]
    second = run_all(engine, submit("t2", [], turn2))["t2"]
    reference = run_all(plain, submit("r2", [], turn2))["r2"]
    assert second["end"].usage.cached_tokens > 0
    assert second["tokens"] == reference["tokens"]


def test_a_turn_aborted_in_its_prefill_keeps_no_state(vm):
    engine = cached_engine(vm)
    assert engine.admit(submit("a", [png(5)], [mlx_vlm_message(QUESTION)])).finish_reason is None
    engine.step()
    (ended,) = engine.abort(["a"])
    assert ended.finish_reason == FinishReason.ABORT
    assert len(engine.turns) == 0


@pytest.mark.parametrize("end", ["stop", "abort"])
def test_a_turn_ended_early_in_the_decode_batch_keeps_its_state_for_the_next(vm, end):
    """Once a request decodes in the batch its KV is cut to what it returned, so a stop string
    or an abort there keeps the conversation's state too; the next turn reuses it and still
    equals a fresh engine's answer."""
    engine, plain = cached_engine(vm), plain_engine(vm)
    full = run_all(plain, submit("f", [png(3)], [mlx_vlm_message(QUESTION)]))["f"]["text"]
    first = submit("t1", [png(3)], [mlx_vlm_message(QUESTION)])
    if end == "stop":
        # A stop string that first occurs halfway through the answer.
        at = next(
            k for k in range(len(full) // 2, len(full) - 3) if full.find(full[k : k + 3]) == k
        )
        first.inputs.sampling.stop = [full[at : at + 3]]
        said = run_all(engine, first)["t1"]["text"]
    else:
        engine.admit(first)
        said = ""
        while "t1" not in engine.batched_ids() or len(said) < 3:
            said += "".join(d.text for d in engine.step() if d.request_id == "t1")
        engine.abort(["t1"])
    assert len(engine.turns) == 1 and 0 < len(said) < len(full)
    second = run_all(engine, submit("t2", [png(3)], follow_up(said)))["t2"]
    reference = run_all(plain, submit("r2", [png(3)], follow_up(said)))["r2"]
    assert second["end"].usage.cached_tokens > 0 and engine.turns.hits == 1
    assert second["tokens"] == reference["tokens"]


def test_states_stay_within_the_byte_budget(vm):
    engine = cached_engine(vm)
    for seed in range(3):
        run_all(engine, submit(f"r{seed}", [png(seed)], [mlx_vlm_message(QUESTION)]))
    assert len(engine.turns) == 3
    one = engine.turns.nbytes // 3
    engine.turns.budget_bytes = one * 2
    run_all(engine, submit("r3", [png(3)], [mlx_vlm_message(QUESTION)]))
    assert len(engine.turns) == 2 and engine.turns.nbytes <= one * 2


def test_no_budget_means_no_reuse(vm):
    engine = VisionEngine(vm, 2048, None, turns=ConversationCache(0))
    first = run_all(engine, submit("t1", [png(5)], [mlx_vlm_message(QUESTION)]))["t1"]
    second = run_all(engine, submit("t2", [png(5)], follow_up(first["text"])))["t2"]
    assert second["end"].usage.cached_tokens == 0 and len(engine.turns) == 0
