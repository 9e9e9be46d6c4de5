"""Vision requests in the decode batch (worker/vision/batched.py), the engine driven in-process
on the tiny checkpoints of four families: eight concurrent requests, images and text mixed,
each equal to direct mlx-vlm alone (greedy); they decode together; an abort leaves the others
equal. Against the engine without the batch (each request on its own mlx-vlm generator, the
path equal to mlx-vlm): the logprobs, a seeded sampled request, a constrained (JSON schema)
one and one with a repetition penalty are the same in the batch."""

from __future__ import annotations

import os

import pytest

from protocol.inputs import ChatInputs, JsonSchema, SamplingParams
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
    # (While requests decode, one picture prefills a unit a step: the others join later.)
    assert together >= 4
    for rid, images, text, n in crowd():
        assert out[rid] == direct_vlm_tokens(path, images, text, n), rid


def test_logprobs_in_the_batch_equal_those_of_the_batch_1_path(family):
    _, vm = family
    together = run_all(VisionEngine(vm, 2048, max_num_seqs=8), *submits(logprobs=0))
    alone = run_all(VisionEngine(vm, 2048, decode_batch=False), *submits(logprobs=0))
    for s in submits():
        assert together[s.request_id]["tokens"] == alone[s.request_id]["tokens"]
        assert together[s.request_id]["logprobs"] == pytest.approx(
            alone[s.request_id]["logprobs"], abs=1e-5
        )


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


def special(rid: str, images: list[bytes], **sampling) -> Submit:
    params = SamplingParams(**{"max_tokens": 12, **sampling})
    inputs = ChatInputs([mlx_vlm_message(TEXTS[1], len(images))], params, images=images)
    return Submit(rid, inputs, stream=False)


SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 0.9, "top_p": 0.95, "seed": 11},
        {"temperature": 0.0, "repetition_penalty": 1.3},
        {"temperature": 0.0, "max_tokens": 24, "constraint": JsonSchema(SCHEMA)},
        {"temperature": 0.7, "seed": 5, "max_tokens": 24, "constraint": JsonSchema(SCHEMA)},
    ],
    ids=["seeded", "penalty", "json", "json-seeded"],
)
def test_a_request_decodes_in_the_batch_as_on_its_own_generator(family, sampling):
    """The joined request's sampler key and its processors' view of the tokens carry over from
    mlx-vlm's generator (which drew a token ahead and shows processors the prompt's last
    token on): the same tokens as on the batch-1 path, in a crowd too."""
    _, vm = family
    ask = [("pic", [png(9)]), ("text", [])]
    batch_1 = VisionEngine(vm, 2048, decode_batch=False)
    expected = {rid: run_all(batch_1, special(rid, images, **sampling))[rid] for rid, images in ask}
    engine = VisionEngine(vm, 2048, max_num_seqs=10)
    got = run_all(engine, *submits(), *(special(rid, images, **sampling) for rid, images in ask))
    for rid, _ in ask:
        assert got[rid]["tokens"] == expected[rid]["tokens"], rid
    if "constraint" in sampling:
        assert got["pic"]["text"].startswith("{")


def test_a_repetition_penalty_sees_the_tokens_mlx_vlm_shows_it(family):
    """mlx-vlm's processors see the prompt's last token and what was generated, not the whole
    prompt: a prompt that ends with the words the model answers with (a penalty over the
    whole prompt would move its answer) decodes in the batch as on the batch-1 path."""
    _, vm = family
    batch_1 = VisionEngine(vm, 2048, decode_batch=False)
    for images in ([png(9)], []):
        plain = run_all(batch_1, special("plain", images, temperature=0.0))["plain"]["text"]
        messages = [mlx_vlm_message(f"{TEXTS[1]} {plain}", len(images))]
        params = SamplingParams(max_tokens=12, temperature=0.0, repetition_penalty=1.5)
        ask = Submit("echo", ChatInputs(messages, params, images=images), stream=False)
        expected = run_all(batch_1, ask)["echo"]["tokens"]
        engine = VisionEngine(vm, 2048, max_num_seqs=8)
        assert run_all(engine, ask)["echo"]["tokens"] == expected
