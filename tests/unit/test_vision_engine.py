"""The mlx-vlm engine, constructed directly on the tiny Qwen2-VL: equal to mlx-vlm, caches, errors."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

from protocol.messages import ErrorCode, FinishReason, Submit
from tests.support.vision import (
    QUESTION,
    chat_submit,
    direct_vlm_tokens,
    mlx_vlm_message,
    mp4,
    png,
    run_all,
)
from tests.support.vision import (
    vision_submit as submit,
)
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_vlm")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worker.vision.engine import VisionEngine, make_text_prefix_caches  # noqa: E402
from worker.vision.model import load_vision_model  # noqa: E402

MAX_TOKENS = 10


@pytest.fixture(scope="module")
def path() -> str:
    return str(ensure_checkpoint("qwen2_vl"))


@pytest.fixture(scope="module")
def vm(path):
    return load_vision_model(path)


@pytest.fixture
def engine(vm) -> VisionEngine:
    return VisionEngine(vm, prefill_step_size=2048)


def direct_tokens(path: str, images: list[bytes], text: str = QUESTION) -> list[int]:
    return direct_vlm_tokens(path, images, text, MAX_TOKENS)


def test_checkpoint_declares_image_input(engine):
    assert "image_in" in engine.capabilities()
    assert "audio_in" not in engine.capabilities()
    assert engine.ready_info().max_context == 4096


def test_greedy_tokens_equal_direct_mlx_vlm(engine, path):
    images = [png(0)]
    got = run_all(engine, submit("a", images))["a"]
    assert got["tokens"] == direct_tokens(path, images)
    assert got["end"].finish_reason == FinishReason.LENGTH
    assert got["end"].usage.completion_tokens == MAX_TOKENS


def test_two_images_equal_direct_mlx_vlm(engine, path):
    images = [png(1), png(2, size=(56, 112))]
    got = run_all(engine, submit("a", images))["a"]
    assert got["tokens"] == direct_tokens(path, images)


def test_interleaved_requests_equal_sequential_ones(engine):
    # Qwen2-VL keeps mRoPE offsets on the model: each generator must see its own. Logprobs
    # show a wrong position even where the greedy token happens to survive it.
    def both() -> tuple[Submit, Submit]:
        return (
            submit("a", [png(3)], logprobs=0),
            submit("b", [png(4, size=(112, 56))], logprobs=0),
        )

    together = run_all(engine, *both())
    first, second = both()
    alone = {**run_all(engine, first), **run_all(engine, second)}
    for rid in ("a", "b"):
        assert together[rid]["tokens"] == alone[rid]["tokens"]
        assert together[rid]["logprobs"] == alone[rid]["logprobs"]
    assert together["a"]["tokens"] != together["b"]["tokens"]


def test_prefix_cache_never_mixes_images(vm):
    apc, text_prefix = make_text_prefix_caches(vm, 64 << 20)
    cached = VisionEngine(vm, 2048, apc, text_prefix=text_prefix)
    plain = VisionEngine(vm, 2048, None)
    order = [png(5), png(6), png(5)]
    with_cache = [
        run_all(cached, submit(f"r{i}", [im]))[f"r{i}"]["tokens"] for i, im in enumerate(order)
    ]
    without = [
        run_all(plain, submit(f"r{i}", [im]))[f"r{i}"]["tokens"] for i, im in enumerate(order)
    ]
    assert with_cache == without
    assert with_cache[0] != with_cache[1]


def test_prefix_cache_serves_a_repeated_text_prompt(vm):
    # Text-only prompts are prefilled in the decode batch, with the text prefix cache.
    apc, text_prefix = make_text_prefix_caches(vm, 64 << 20)
    cached = VisionEngine(vm, 2048, apc, text_prefix=text_prefix)
    plain = VisionEngine(vm, 2048, None)
    text = " ".join(["a long shared question about the picture"] * 8)
    messages = [{"role": "user", "content": text}]
    first = run_all(cached, submit("a", [], messages))["a"]
    second = run_all(cached, submit("b", [], messages))["b"]
    reference = run_all(plain, submit("c", [], messages))["c"]
    assert first["end"].usage.cached_tokens == 0
    assert second["end"].usage.cached_tokens > 0
    assert first["tokens"] == second["tokens"] == reference["tokens"]


def test_prefix_cache_lookups_are_counted_in_tokens(vm):
    from worker.runtime.stats import WorkerStats

    stats, unbound = WorkerStats(model="vlm"), WorkerStats(model="plain")
    apc, text_prefix = make_text_prefix_caches(vm, 64 << 20)
    cached = VisionEngine(vm, 2048, apc, text_prefix=text_prefix)
    cached.bind_stats(stats)
    plain = VisionEngine(vm, 2048, None)  # no prefix cache: no lookups
    plain.bind_stats(unbound)
    messages = [{"role": "user", "content": " ".join(["a question said twice"] * 8)}]
    ends = [run_all(cached, submit(r, [], messages))[r]["end"] for r in ("a", "b")]
    run_all(plain, submit("c", [], messages))
    snapshot = stats.snapshot()
    assert snapshot.prefix_cache_queries == sum(e.usage.prompt_tokens for e in ends)
    assert snapshot.prefix_cache_hits == ends[1].usage.cached_tokens > 0
    assert unbound.snapshot().prefix_cache_queries == 0


def test_repeated_image_is_served_from_the_vision_cache(engine):
    run_all(engine, submit("a", [png(7)]))
    encoded = engine.vision_cache.encoded
    run_all(engine, submit("b", [png(7)]))
    assert engine.vision_cache.encoded == encoded
    assert engine.vision_cache.hits >= 1
    run_all(engine, submit("c", [png(8)]))
    assert engine.vision_cache.encoded == encoded + 1


def test_abort_mid_generation_ends_the_request(engine):
    assert engine.admit(submit("a", [png(9)], max_tokens=50)).finish_reason is None
    tokens = 0
    while tokens < 2:
        tokens += sum(len(d.token_ids) for d in engine.step())
    (ended,) = engine.abort(["a", "unknown"])
    assert ended.finish_reason == FinishReason.ABORT
    assert ended.usage.completion_tokens == 2
    assert engine.active_ids() == []
    assert run_all(engine, submit("b", [png(9)]))["b"]["end"].finish_reason == FinishReason.LENGTH


def test_a_prefill_runs_a_unit_a_step_and_a_text_request_beside_it_decodes_meanwhile(vm, path):
    engine = VisionEngine(vm, prefill_step_size=8)  # chunks of 8: the prompt is about 40
    text = chat_submit("t", [{"role": "user", "content": "Hello"}], max_tokens=30)
    assert engine.admit(text).finish_reason is None
    while not any(d.token_ids for d in engine.step()):  # the text request decodes now
        pass
    assert engine.admit(submit("a", [png(11)])).finish_reason is None
    order = []  # which requests gave a token, step by step
    picture_tokens: list[int] = []
    while engine.active_ids():
        deltas = engine.step()
        order.append({d.request_id for d in deltas if d.token_ids})
        picture_tokens += [t for d in deltas if d.request_id == "a" for t in d.token_ids]
    first_picture_token = next(i for i, ids in enumerate(order) if "a" in ids)
    text_tokens_before = sum("t" in ids for ids in order[:first_picture_token])
    # The vision tower, then one chunk a step: the text request decodes all along.
    assert first_picture_token >= 5 and text_tokens_before >= 5
    direct = direct_vlm_tokens(path, [png(11)], QUESTION, MAX_TOKENS, prefill_step_size=8)
    assert picture_tokens == direct  # interleaved with the text request's decoding
    assert run_all(engine, submit("b", [png(11)]))["b"]["tokens"] == direct


def assert_pictures_end_as_direct(
    engine: VisionEngine, path: str, pictures: dict[str, bytes], got: dict[str, list[int]]
) -> None:
    """Steps `engine` until the pictures' requests end; each one's tokens (with those in `got`
    so far) equal direct mlx-vlm's with prefill chunks of 8."""
    while any(rid in engine.active_ids() for rid in pictures):
        for d in engine.step():
            if d.request_id in got:
                got[d.request_id] += d.token_ids
    for rid, picture in pictures.items():
        direct = direct_vlm_tokens(path, [picture], QUESTION, MAX_TOKENS, prefill_step_size=8)
        assert got[rid] == direct


@pytest.mark.parametrize(("streamed", "interleave"), [(True, 0.7), (False, 0.7), (True, 0.0)])
def test_while_a_request_decodes_pictures_prefill_a_unit_each_or_one_beside_a_stream(
    vm, path, streamed, interleave
):
    """Beside a streamed request one picture's run begins a unit a step, in turn; beside one
    whose client does not stream, or with --prefill-interleave 0 (no pacing), every picture's
    run does (the batch decodes fewer steps)."""
    engine = VisionEngine(vm, prefill_step_size=8, interleave=interleave)
    one_at_a_time = streamed and interleave > 0
    hello = [{"role": "user", "content": "Hello"}]
    text = chat_submit("t", hello, max_tokens=60, stream=streamed)
    assert engine.admit(text).finish_reason is None
    while not any(d.token_ids for d in engine.step()):  # the text request decodes now
        pass
    pictures = {"a": png(13), "b": png(14, (112, 56))}
    for rid, picture in pictures.items():
        assert engine.admit(submit(rid, [picture])).finish_reason is None

    def begun() -> dict[str, int]:  # units of prefill each picture's run began so far
        runs = {r: g._results for r, g in engine._active.items() if r in pictures}
        return {r: run.pauses for r, run in runs.items() if run is not None}

    got: dict[str, list[int]] = {rid: [] for rid in pictures}
    while any(rid in engine._active for rid in pictures):
        before = begun()
        deltas = engine.step()
        after = begun()
        advanced = [r for r in after if after[r] > before.get(r, 0)]
        assert any(d.request_id == "t" for d in deltas)
        if one_at_a_time:
            assert sum(after[r] - before.get(r, 0) for r in after) <= 1
        else:  # every run still prefilling began a unit (or ended its prefill)
            assert advanced == list(after) and all(after[r] - before.get(r, 0) == 1 for r in after)
        for d in deltas:
            if d.request_id in got:
                got[d.request_id] += d.token_ids
    assert_pictures_end_as_direct(engine, path, pictures, got)


@pytest.mark.parametrize(("streamed", "interleave"), [(True, 0.7), (False, 0.7), (True, 0.0)])
def test_beside_a_streamed_request_a_prefill_chunk_pauses_before_each_decoder_layer(
    vm, path, streamed, interleave
):
    """Alone, a picture's prefill is a unit per vision block, the merger and per chunk; beside
    a streamed decoding request each chunk is a unit per decoder layer (worker/vision/paced.py)
    and each block two, its two passes (too small to cut further: worker/vision/slicing.py);
    beside one not streamed, or with --prefill-interleave 0, as alone. The same tokens every
    way."""

    def units_and_tokens(engine: VisionEngine, rid: str) -> tuple[int, list[int]]:
        units, tokens = 0, []
        while rid in engine.active_ids():
            generation = engine._active.get(rid)
            run = getattr(generation, "_results", None)
            for d in engine.step():
                if d.request_id == rid:
                    tokens += d.token_ids
            if run is not None:
                units = max(units, run.pauses)
        return units, tokens

    picture = png(15)
    alone = VisionEngine(vm, prefill_step_size=16)
    assert alone.admit(submit("a", [picture])).finish_reason is None
    units_alone, tokens_alone = units_and_tokens(alone, "a")

    beside = VisionEngine(vm, prefill_step_size=16, interleave=interleave)
    hello = [{"role": "user", "content": "Hello"}]
    text = chat_submit("t", hello, max_tokens=200, stream=streamed)
    assert beside.admit(text).finish_reason is None
    while not any(d.token_ids for d in beside.step()):  # the text request decodes now
        pass
    assert beside.admit(submit("a", [picture])).finish_reason is None
    units_beside, tokens_beside = units_and_tokens(beside, "a")

    blocks = len(vm.model.vision_tower.blocks)
    layers = len(vm.model.language_model.layers)
    chunks = units_alone - blocks - 1
    assert chunks >= 2 and layers >= 2
    paced = streamed and interleave > 0
    assert units_beside == (2 * blocks + 1 + chunks * layers if paced else units_alone)
    direct = direct_vlm_tokens(path, [picture], QUESTION, MAX_TOKENS, prefill_step_size=16)
    assert tokens_alone == tokens_beside == direct


def test_a_stream_is_paced_from_its_first_step_to_the_one_that_ends_it(vm, path):
    """A streamed request arriving while two pictures prefill: from its first step (its prompt
    still prefilling, no decode step timed: the least units) to the step that ends it (whose
    token leaves after that step's unit), each step begins at most one unit of the pictures',
    with a budget; the pictures' tokens still equal direct mlx-vlm's."""
    engine = VisionEngine(vm, prefill_step_size=8)
    pictures = {"a": png(13), "b": png(14, (112, 56))}
    for rid, picture in pictures.items():
        assert engine.admit(submit(rid, [picture])).finish_reason is None
    engine.step()  # a unit of a picture, nothing streamed yet
    hello = [{"role": "user", "content": "Hello"}]
    assert engine.admit(chat_submit("t", hello, max_tokens=6, stream=True)).finish_reason is None

    seen: dict[str, int] = {}  # units each picture's run began so far

    def begun() -> dict[str, tuple[int, float | None]]:
        out = {}
        for rid, generation in engine._active.items():
            run = getattr(generation, "_results", None)
            if rid in pictures and run is not None and run.pauses > seen.get(rid, 0):
                out[rid] = (run.pauses - seen.get(rid, 0), run.budget.seconds)
                seen[rid] = run.pauses
        return out

    begun()
    got: dict[str, list[int]] = {rid: [] for rid in pictures}
    budgets: list[float | None] = []
    while "t" in engine.active_ids():
        deltas = engine.step()
        units = begun()
        assert sum(n for n, _ in units.values()) <= 1
        budgets += [budget for _, budget in units.values()]
        for d in deltas:
            if d.request_id in got:
                got[d.request_id] += d.token_ids
    assert any(rid in engine._active for rid in pictures)  # the stream ended first
    assert budgets and budgets[0] == 0.0 and all(b is not None for b in budgets)
    assert_pictures_end_as_direct(engine, path, pictures, got)


def test_an_abort_in_the_middle_of_a_prefill_leaves_the_model_as_it_was(vm, path):
    engine = VisionEngine(vm, prefill_step_size=8)
    assert engine.admit(submit("a", [png(12)])).finish_reason is None
    for _ in range(3):  # the vision tower and two chunks, no token yet
        assert engine.step() == []
    run = engine._active["a"]._results
    assert run is not None and not run.dead
    (ended,) = engine.abort(["a"])
    assert run.dead  # its frames unwound: nothing of the request is held
    assert ended.finish_reason == FinishReason.ABORT and ended.usage.completion_tokens == 0
    direct = direct_vlm_tokens(path, [png(12)], QUESTION, MAX_TOKENS, prefill_step_size=8)
    assert run_all(engine, submit("b", [png(12)]))["b"]["tokens"] == direct


def test_two_requests_with_the_same_new_picture_encode_it_once(vm, path):
    # Their prefills interleave: the second waits for the first's features, not encodes too.
    engine = VisionEngine(vm, prefill_step_size=8)
    encoded = engine.vision_cache.encoded
    got = run_all(engine, submit("a", [png(14)]), submit("b", [png(14)]))
    assert engine.vision_cache.encoded == encoded + 1
    direct = direct_vlm_tokens(path, [png(14)], QUESTION, MAX_TOKENS, prefill_step_size=8)
    assert got["a"]["tokens"] == got["b"]["tokens"] == direct


def test_a_request_waiting_for_features_encodes_them_when_the_encoder_is_aborted(vm, path):
    engine = VisionEngine(vm, prefill_step_size=8)
    encoded = engine.vision_cache.encoded
    for request_id in ("a", "b"):
        assert engine.admit(submit(request_id, [png(15)])).finish_reason is None
    assert engine.step() == [] and engine.step() == []  # a began encoding; b waits
    assert engine._active["b"]._results.pauses == 0  # b began no unit of its own
    engine.abort(["a"])
    tokens = []
    while engine.active_ids():
        tokens += [t for d in engine.step() for t in d.token_ids]
    assert engine.vision_cache.encoded == encoded + 1  # b's own, once a's was dropped
    direct = direct_vlm_tokens(path, [png(15)], QUESTION, MAX_TOKENS, prefill_step_size=8)
    assert tokens == direct


def test_an_abort_before_the_first_unit_ends_the_paused_run_too(vm):
    # The first step pauses inside the feature cache's encoding, before mlx-vlm's generator
    # exists: an abort there must still end the run (it was left alive, holding its arrays).
    engine = VisionEngine(vm, prefill_step_size=8)
    assert engine.admit(submit("a", [png(13)])).finish_reason is None
    assert engine.step() == []
    run = engine._active["a"]._results
    assert run is not None and run.iterator is None and not run.dead
    engine.abort(["a"])
    assert run.dead
    gone = weakref.ref(run)
    del run
    gc.collect()
    assert gone() is None


def test_corrupt_image_is_a_bad_request_and_the_engine_goes_on(engine):
    bad = engine.admit(submit("bad", [b"\x89PNG\r\n\x1a\n not really a png"]))
    assert bad.finish_reason == FinishReason.ERROR
    assert bad.error.code == ErrorCode.BAD_REQUEST
    assert "images[0]" in bad.error.message
    assert run_all(engine, submit("ok", [png(0)]))["ok"]["end"].finish_reason == FinishReason.LENGTH


@pytest.mark.parametrize(
    ("messages", "images", "needle"),
    [
        ([mlx_vlm_message(QUESTION, 2)], [png(0)], "2 image parts but 1 images"),
        (
            [
                {"role": "assistant", "content": [{"type": "image"}]},
                {"role": "user", "content": "hi"},
            ],
            [png(0)],
            "only in user messages",
        ),
        ([{"role": "user", "content": [{"type": "file"}]}], [], "must be a part of type"),
        ([{"role": "user", "content": [{"type": "video"}]}], [], "1 video parts but 0 videos"),
    ],
)
def test_malformed_media_messages_are_bad_requests(engine, messages, images, needle):
    delta = engine.admit(submit("x", images, messages))
    assert delta.error is not None and delta.error.code == ErrorCode.BAD_REQUEST
    assert needle in delta.error.message


def test_a_video_outside_user_messages_is_a_bad_request(engine):
    messages = [{"role": "assistant", "content": [{"type": "video", "max_frames": 4}]},
                {"role": "user", "content": "hi"}]  # fmt: skip
    delta = engine.admit(chat_submit("v", messages, max_tokens=4, videos=[mp4(0)]))
    assert delta.error is not None and delta.error.code == ErrorCode.BAD_REQUEST
    assert "videos are accepted only in user messages" in delta.error.message


def test_backend_auto_picks_mlx_vlm_for_vision_models_only(path):
    from worker.runtime.loading import TEXT, VISION, main_model_kind

    text_path = str(ensure_checkpoint("qwen3"))
    assert main_model_kind(path) == VISION
    assert main_model_kind(text_path) == TEXT
    assert main_model_kind(path, "text") == TEXT
    assert main_model_kind(text_path, "omni") == VISION


def test_unknown_mlx_vlm_model_type_fails_naming_the_supported_ones(path, tmp_path):
    import json
    import shutil

    from worker.runtime.loading import main_model_kind

    copy = tmp_path / "ckpt"
    shutil.copytree(path, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "model_type": "no_such_vl"}))
    with pytest.raises(
        ValueError, match="no_such_vl is not supported by mlx-vlm; supported: .*qwen2_vl"
    ):
        main_model_kind(str(copy))


def test_a_token_without_an_entry_in_the_tokenizer_adds_no_text():
    """A padded vocabulary's rows past the tokenizer's entries (the `padded` checkpoint's
    random weights pick them often) have no text: the request goes on, its text that of its
    other tokens, where mlx-vlm's detokenizer raises an IndexError (a 500 before)."""
    vm = load_vision_model(str(ensure_checkpoint("qwen2_vl", "padded")))
    tokenizer = vm.processor.tokenizer
    entries = len(tokenizer)
    asked = chat_submit("p", [mlx_vlm_message(QUESTION)], max_tokens=24, images=[png(3)])
    got = run_all(VisionEngine(vm), asked)["p"]
    assert got["end"].finish_reason == FinishReason.LENGTH and len(got["tokens"]) == 24
    assert any(t >= entries for t in got["tokens"])  # the case the test is about happened
    assert got["text"] == tokenizer.decode([t for t in got["tokens"] if t < entries])
