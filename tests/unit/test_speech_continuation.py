"""A Qwen3-TTS phrase spoken as the continuation of the one before (worker/speech/
continuation.py): continued from the first frames of a whole text's generation it makes that
generation's next frames; the engine hands a phrase's context back and the next phrase goes on
from it, equal to mlx-audio's generator with the same prompt; a context the model cannot take
is a bad request naming it."""

from __future__ import annotations

import mlx.core as mx
import msgpack
import pytest

from tests.support.speech import generated_audio, grouped_as_served, run, sine_wav, submit
from worker.speech.audio import decode_reference, to_pcm16
from worker.speech.continuation import Context, continuing, joined, pack, unpack
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.speech.staged import CodecStaging
from worker.tiny_models import ensure_checkpoint

FIRST, SECOND = "The sea was calm that morning,", "and the boats went out early."
GREEDY = {"voice": "ryan", "lang_code": "auto", "temperature": 0.0, "repetition_penalty": 1.0}


@pytest.fixture(scope="module")
def qwen3() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("qwen3_tts")))


def frames(model, **kwargs) -> mx.array:
    """The codec frames mlx-audio's generator makes ([1, groups, frames]), undecoded."""
    staging = CodecStaging(model.speech_tokenizer)
    with staging.deferring() as ops:
        for _ in model.generate(stream=True, streaming_interval=0.08, **kwargs):
            pass
    return mx.concatenate([op for op in ops if not isinstance(op, str)], axis=2)


@pytest.mark.parametrize("spoken", [1, 3, 5])
def test_continued_from_a_whole_texts_first_frames_it_makes_the_next_ones(qwen3, spoken):
    model = qwen3.model
    whole = frames(model, text=f"{FIRST} {SECOND}", max_tokens=8, **GREEDY)
    assert whole.shape[2] == 8  # greedy, the tiny model runs to the cap
    with continuing(model, Context(FIRST, whole[:, :, :spoken])):
        rest = frames(model, text=SECOND, max_tokens=8 - spoken, **GREEDY)
    assert mx.array_equal(rest, whole[:, :, spoken:]).item()


def test_a_context_round_trips_and_is_checked(qwen3):
    codes = mx.array([[[1, 2, 3]] * 16], dtype=mx.int32)
    context = unpack(pack("Hello,", codes), 16, 2048)
    assert context.text == "Hello," and mx.array_equal(context.codes, codes).item()
    with pytest.raises(Exception, match="context"):
        unpack(pack("Hello,", codes), 8, 2048)  # another model's groups
    with pytest.raises(Exception, match="codebook"):
        unpack(pack("Hello,", codes + 4096), 16, 2048)
    for bad in (b"", b"\x00junk", msgpack.packb({"v": 1})):
        with pytest.raises(Exception, match="context"):
            unpack(bad, 16, 2048)


def direct_continued(model, context: bytes, seed: int, text: str) -> bytes:
    """mlx-audio's generator for `text` with the continued prompt, seeded, decoded in the
    server's chunks."""
    mx.random.seed(seed)
    with continuing(model, unpack(context, 16, 2048)):
        audio = generated_audio(model, text=text, voice="ryan", lang_code="auto", stream=True,
                                streaming_interval=0.08)  # fmt: skip
    return b"".join(to_pcm16(a) for a in audio)


def pcm(deltas: list) -> bytes:
    return b"".join(d.audio for d in deltas if d.audio)


def test_a_phrase_goes_on_from_the_context_the_one_before_handed_back(qwen3):
    first = run(qwen3, submit("a", FIRST, voice="ryan", seed=3))["a"]
    context = first[-1].speech_context
    assert first[-1].finish_reason == "stop" and context
    unpacked = unpack(context, 16, 2048)
    assert unpacked.text == FIRST
    assert unpacked.codes.shape[2] == first[-1].usage.completion_tokens
    for _ in range(2):  # the voice cache cold, then warm
        second = run(qwen3, submit("b", SECOND, voice="ryan", seed=4, context=context))["b"]
        assert second[-1].finish_reason == "stop", second[-1].error
        assert pcm(second) == direct_continued(qwen3.model, context, 4, SECOND)
    alone = run(qwen3, submit("c", SECOND, voice="ryan", seed=4))["c"]
    assert pcm(second) != pcm(alone)


def test_the_context_holds_the_frames_the_phrase_was_made_of(qwen3):
    deltas = run(qwen3, submit("a", FIRST, voice="vivian", seed=5))["a"]
    mx.random.seed(5)
    with grouped_as_served(qwen3.model) as grouping:
        for _ in qwen3.model.generate(text=FIRST, voice="vivian", lang_code="auto",
                                      stream=True, streaming_interval=0.08):  # fmt: skip
            pass
    want = mx.concatenate(grouping.codes, axis=2)
    assert mx.array_equal(unpack(deltas[-1].speech_context, 16, 2048).codes, want).item()


def test_a_context_the_model_cannot_take_is_a_bad_request_naming_it(qwen3):
    codes = mx.zeros((1, 16, 2), dtype=mx.int32)
    for context in (b"junk", pack(FIRST, codes[:, :8]), pack(FIRST, codes + 5000)):
        refused = qwen3.admit(submit("a", SECOND, voice="ryan", context=context))
        assert refused.error.code == "bad_request" and "context" in refused.error.message
    assert qwen3.active_ids() == []


def test_a_family_that_cannot_continue_refuses_a_context_and_hands_none_back():
    soprano = load_tts_engine(str(ensure_checkpoint("soprano")))
    codes = mx.zeros((1, 16, 2), dtype=mx.int32)
    refused = soprano.admit(submit("a", SECOND, context=pack(FIRST, codes)))
    assert refused.error.code == "bad_request" and "context" in refused.error.message
    deltas = run(soprano, submit("b", FIRST, seed=1))["b"]
    assert deltas[-1].finish_reason == "stop" and deltas[-1].speech_context == b""


def test_a_voice_cloned_from_audio_alone_goes_on_and_an_in_context_clone_does_not():
    base = load_tts_engine(str(ensure_checkpoint("qwen3_tts_base")))
    clip = sine_wav(1.0, base.sample_rate)
    first = run(base, submit("a", FIRST, ref_audio=clip, seed=2))["a"]
    context = first[-1].speech_context
    assert first[-1].finish_reason == "stop" and context
    second = run(base, submit("b", SECOND, ref_audio=clip, seed=3, context=context))["b"]
    assert second[-1].finish_reason == "stop", second[-1].error
    ref_audio = decode_reference(clip, base.sample_rate)  # as the engine reads the clip
    mx.random.seed(3)
    with continuing(base.model, unpack(context, 16, 2048)):
        audio = generated_audio(base.model, text=SECOND, ref_audio=ref_audio, lang_code="auto",
                                stream=True, streaming_interval=0.08)  # fmt: skip
    assert pcm(second) == b"".join(to_pcm16(a) for a in audio)
    # In context, the prompt holds the clip and its transcript: no context either way.
    in_context = run(base, submit("c", FIRST, ref_audio=clip, ref_text="Hello there.", seed=2))
    assert in_context["c"][-1].speech_context == b""
    refused = base.admit(
        submit("d", SECOND, ref_audio=clip, ref_text="Hello there.", context=context)
    )
    assert refused.error.code == "bad_request" and "context" in refused.error.message


def test_no_context_is_handed_back_that_no_request_could_take_or_for_lines(qwen3, monkeypatch):
    from worker.speech import engine as speech_engine

    monkeypatch.setattr(speech_engine, "MAX_CONTEXT_FRAMES", 2)
    long = run(qwen3, submit("a", FIRST, voice="ryan", seed=3))["a"]
    assert long[-1].finish_reason == "stop" and long[-1].usage.completion_tokens > 2
    assert long[-1].speech_context == b""
    monkeypatch.undo()
    lines = run(qwen3, submit("b", f"{FIRST}\n{SECOND}", voice="ryan", seed=3))["b"]
    assert lines[-1].finish_reason == "stop" and lines[-1].speech_context == b""


def test_phrases_join_with_a_space_except_after_a_wide_character():
    assert joined("The sea was calm,", "and the boats") == "The sea was calm, and the boats"
    assert joined("海は穏やかで、", "船は出た。") == "海は穏やかで、船は出た。"
