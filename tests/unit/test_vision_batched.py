"""Vision requests in the decode batch (worker/vision/batched.py), the engine driven in-process
on the tiny checkpoints of four families: eight concurrent requests, images and text mixed,
each equal to direct mlx-vlm alone (greedy, with its logprobs); they decode together; an abort
leaves the others equal; a seeded sampled request is the same alone and in a crowd."""

from __future__ import annotations

import os

import pytest

from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import FinishReason, Submit
from tests.support.vision import direct_vlm_tokens, mlx_vlm_message, png, run_all
from tests.support.vision import vision_submit as submit
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_vlm")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worker.vision.engine import VisionEngine  # noqa: E402
from worker.vision.model import load_vision_model  # noqa: E402

TEXTS = ["What is this?", "Describe the picture in detail.", "Hello there, how are you?"]


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3"])
def family(request) -> tuple[str, object]:
    path = str(ensure_checkpoint(request.param))
    return path, load_vision_model(path)


def crowd() -> list[tuple[str, list[bytes], str, int]]:
    """Eight requests: (id, images, question, max_tokens): five about pictures (one about
    two), three of text only, of different lengths."""
    return [
        ("img0", [png(0)], TEXTS[0], 12),
        ("txt0", [], TEXTS[2], 9),
        ("img1", [png(1, (112, 56))], TEXTS[1], 14),
        ("two", [png(2), png(3)], TEXTS[0], 7),
        ("txt1", [], TEXTS[1] * 3, 13),
        ("img2", [png(4)], TEXTS[1], 11),
        ("txt2", [], "Hi", 10),
        ("img3", [png(5, (56, 112))], TEXTS[2], 8),
    ]


def submits(logprobs: int | None = None) -> list[Submit]:
    return [
        submit(rid, images, [mlx_vlm_message(text, len(images))], n, logprobs=logprobs)
        for rid, images, text, n in crowd()
    ]


def test_eight_mixed_requests_decode_together_each_equal_to_direct_mlx_vlm(family):
    path, vm = family
    engine = VisionEngine(vm, 2048, max_num_seqs=8)
    assert engine.ready_info().batching == "continuous"
    for s in submits():
        assert engine.admit(s).finish_reason is None
    out: dict[str, list[int]] = {s.request_id: [] for s in submits()}
    together = 0
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id] += delta.token_ids
        together = max(together, len(engine.batched_ids()))
    assert together >= 6  # the pictures' prefills end at different steps
    for rid, images, text, n in crowd():
        assert out[rid] == direct_vlm_tokens(path, images, text, n), rid


def test_logprobs_in_the_batch_equal_those_of_each_request_alone(family):
    _, vm = family
    engine = VisionEngine(vm, 2048, max_num_seqs=8)
    together = run_all(engine, *submits(logprobs=0))
    for s in submits(logprobs=0):
        alone = run_all(engine, s)[s.request_id]
        assert together[s.request_id]["tokens"] == alone["tokens"]
        assert together[s.request_id]["logprobs"] == pytest.approx(alone["logprobs"], abs=1e-5)


def test_an_abort_in_the_batch_leaves_the_others_equal(family):
    path, vm = family
    engine = VisionEngine(vm, 2048, max_num_seqs=8)
    for s in submits():
        engine.admit(s)
    out: dict[str, list[int]] = {s.request_id: [] for s in submits()}
    while "img1" not in engine.batched_ids():
        for delta in engine.step():
            out[delta.request_id] += delta.token_ids
    [ended] = engine.abort(["img1"])
    assert ended.finish_reason == FinishReason.ABORT and "img1" not in engine.active_ids()
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id] += delta.token_ids
    for rid, images, text, n in crowd():
        if rid != "img1":
            assert out[rid] == direct_vlm_tokens(path, images, text, n), rid


def test_a_seeded_sampled_request_is_the_same_alone_and_in_the_batch(family):
    _, vm = family

    def sampled() -> Submit:
        params = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=11)
        inputs = ChatInputs([mlx_vlm_message(TEXTS[1], 1)], params, images=[png(9)])
        return Submit("seeded", inputs, stream=False)

    engine = VisionEngine(vm, 2048, max_num_seqs=8)
    alone = run_all(engine, sampled())["seeded"]["tokens"]
    crowd_out = run_all(engine, *submits(), sampled())["seeded"]["tokens"]
    assert alone == crowd_out and len(alone) == 12
