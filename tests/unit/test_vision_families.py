"""The mlx-vlm engine on Qwen2.5-VL, Qwen3-VL and Gemma 3: equal to mlx-vlm called directly.

Each family's tiny checkpoint is served by a `VisionEngine` built in-process; the reference is
mlx-vlm's own `load` + `apply_chat_template` + `stream_generate` on the same PIL images.
"""

from __future__ import annotations

import os

import pytest

from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import FinishReason, Submit
from tests.support.vision import chat_submit, direct_vlm_tokens, mlx_vlm_message, png, run_all
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_vlm")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worker.vision.engine import VisionEngine, make_text_prefix_caches  # noqa: E402
from worker.vision.model import load_vision_model  # noqa: E402

FAMILIES = ("qwen2_5_vl", "qwen3_vl", "gemma3")
# Families whose image features the engine reuses across requests (worker/vision/features.py).
FEATURE_CACHE_FAMILIES = ("qwen2_5_vl", "gemma3")
QUESTION = "What is this?"
MAX_TOKENS = 8
# 224 x 112 px: 16 x 8 patches, two of Qwen2.5-VL's 112 px attention windows.
WIDE = (224, 112)


def submit(rid: str, images: list[bytes], logprobs: int | None = None) -> Submit:
    messages = [mlx_vlm_message(QUESTION, len(images))]
    return chat_submit(rid, messages, images=images, max_tokens=MAX_TOKENS, logprobs=logprobs)


def direct_tokens(path: str, images: list[bytes]) -> list[int]:
    return direct_vlm_tokens(path, images, QUESTION, MAX_TOKENS)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request) -> tuple[str, str, object]:
    """(arch, checkpoint path, loaded VisionModel), one family at a time."""
    path = str(ensure_checkpoint(request.param))
    return request.param, path, load_vision_model(path)


@pytest.fixture
def engine(family) -> VisionEngine:
    return VisionEngine(family[2], prefill_step_size=2048)


def test_checkpoint_is_served_as_an_image_model(family, engine):
    arch, _, vm = family
    assert vm.model.config.model_type == arch
    assert "image_in" in engine.capabilities()
    assert "audio_in" not in engine.capabilities()


def test_greedy_tokens_equal_direct_mlx_vlm(family, engine):
    _, path, _ = family
    images = [png(0)]
    got = run_all(engine, submit("a", images))["a"]
    assert got["tokens"] == direct_tokens(path, images)
    assert got["end"].finish_reason == FinishReason.LENGTH
    assert got["end"].usage.completion_tokens == MAX_TOKENS


def test_two_images_equal_direct_mlx_vlm(family, engine):
    _, path, _ = family
    images = [png(1, size=WIDE), png(2, size=(56, 112))]
    assert run_all(engine, submit("a", images))["a"]["tokens"] == direct_tokens(path, images)


def test_interleaved_requests_equal_sequential_ones(family, engine):
    # Qwen-style models keep mRoPE offsets on the model object: each request must see its
    # own. Logprobs show a wrong position even where the greedy token survives it.
    def both() -> tuple[Submit, Submit]:
        return submit("a", [png(3)], logprobs=0), submit("b", [png(4, size=WIDE)], logprobs=0)

    together = run_all(engine, *both())
    first, second = both()
    alone = {**run_all(engine, first), **run_all(engine, second)}
    for rid in ("a", "b"):
        assert together[rid]["tokens"] == alone[rid]["tokens"]
        assert together[rid]["logprobs"] == alone[rid]["logprobs"]
    assert together["a"]["tokens"] != together["b"]["tokens"]


def test_repeated_image_uses_the_vision_cache_where_the_family_allows(family, engine):
    arch, path, _ = family
    first = run_all(engine, submit("a", [png(7)]))["a"]["tokens"]
    encoded, hits = engine.vision_cache.encoded, engine.vision_cache.hits
    second = run_all(engine, submit("b", [png(7)]))["b"]["tokens"]
    assert first == second == direct_tokens(path, [png(7)])
    assert engine.vision_cache.encoded == encoded
    if arch in FEATURE_CACHE_FAMILIES:
        assert encoded == 1 and engine.vision_cache.hits > hits
    else:
        # Qwen3-VL: cached features would drop its deepstack inputs, so nothing is cached.
        assert encoded == 0 and engine.vision_cache.hits == 0


def test_prefix_cache_keeps_answers_equal_and_images_apart(family):
    _, _, vm = family
    apc, text_prefix = make_text_prefix_caches(vm, 64 << 20)
    cached = VisionEngine(vm, 2048, apc, text_prefix=text_prefix)
    plain = VisionEngine(vm, 2048, None)
    order = [png(5), png(6), png(5)]

    def answers(engine: VisionEngine) -> list[list[int]]:
        return [
            run_all(engine, submit(f"r{i}", [im]))[f"r{i}"]["tokens"] for i, im in enumerate(order)
        ]

    with_cache = answers(cached)
    assert with_cache == answers(plain)
    assert with_cache[0] != with_cache[1]


TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_tools_reach_the_prompt_whether_the_template_renders_them_or_not(family, engine):
    """prompt_tokens with tools > without: Qwen3-VL's template renders them; the tiny
    Qwen2.5-VL's and Gemma 3's cannot, so they get the Hermes system block and the Hermes
    parser (worker/text/tool_fallback.py): never accepted and unseen."""
    from worker.text.tool_fallback import template_renders_tools

    arch, _, vm = family
    assert template_renders_tools(vm.tokenizer) == (arch == "qwen3_vl")

    def prompt_tokens(**fields) -> int:
        params = SamplingParams(max_tokens=1, temperature=0.0)
        inputs = ChatInputs([mlx_vlm_message(QUESTION)], params, images=[png(0)], **fields)
        return run_all(engine, Submit("t", inputs, stream=False))["t"]["end"].usage.prompt_tokens

    assert prompt_tokens(tools=[TOOL]) > prompt_tokens() + 20


@pytest.mark.parametrize("arch", ["qwen2_vl", "qwen3_omni_moe"])
def test_the_other_media_families_see_the_tools_too(arch):
    """The rest of the tiny media checkpoints: Qwen2-VL's template cannot render tools (the
    fallback), Qwen3-Omni's can."""
    from worker.vision.prompt import chat_prompt_text

    vm = load_vision_model(str(ensure_checkpoint(arch)))
    params = SamplingParams(max_tokens=1)
    plain = chat_prompt_text(vm, ChatInputs([mlx_vlm_message(QUESTION, 0)], params), 0, 0)
    inputs = ChatInputs([mlx_vlm_message(QUESTION, 0)], params, tools=[TOOL])
    tooled = chat_prompt_text(vm, inputs, 0, 0)
    assert len(vm.tokenizer.encode(tooled)) > len(vm.tokenizer.encode(plain)) + 20
    assert '"name": "get_weather"' in tooled


def test_a_fallback_tool_result_after_audio_is_a_bad_request(family):
    """mlx-vlm puts audio in the last user turn, which a tool result written as a user turn
    would become: refused, naming why, rather than the audio moved."""
    from worker.runtime.errors import RequestError
    from worker.vision.prompt import chat_prompt_text

    arch, _, vm = family
    call = {"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}  # fmt: skip
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "audio"}]},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
    ]
    inputs = ChatInputs(messages, SamplingParams(max_tokens=1), tools=[TOOL])
    if arch == "qwen3_vl":  # renders tools and tool turns itself
        assert "18 C" in chat_prompt_text(vm, inputs, 0, 1)
        return
    with pytest.raises(RequestError, match="audio with tool results"):
        chat_prompt_text(vm, inputs, 0, 1)
