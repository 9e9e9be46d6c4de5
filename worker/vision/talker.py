"""Qwen3-Omni's own voice: a chat answered in text and spoken by the model's talker, through
mlx-vlm's `Model.generate_stream` (mlx_vlm/models/qwen3_omni_moe).

A chat request with `talker_speaker` on a Qwen3-Omni checkpoint whose talker is enabled
(`enable_audio_output` in its config) runs here instead of `stream_generate`. mlx-vlm's
generator has two phases, and so does the request:

1. its first `next()` runs the thinker to the end of the answer (prefill and every token, in
   one call: mlx-vlm keeps the hidden states the talker needs) and yields the token ids; each
   goes once through the request's `TextRequest`, as the other engines' tokens do (EOS,
   max_tokens, detokenizing, reasoning / tool parsing, usage), and the text deltas go out at
   once, with the terminal held back;
2. each later `next()` yields a chunk of the code2wav decoder's 24 kHz waveform, sent as a
   PCM16 audio delta; the terminal follows the last chunk.

Sampling: the request's temperature, top_p, top_k and min_p drive the thinker (as
`thinker_*`), and its temperature and top_p the talker (0: greedy, mlx-vlm's argmax), so a
greedy request's text and audio equal `generate_stream(..., temperature 0)` called directly,
sample for sample (tests/e2e/test_talker.py). What mlx-vlm's thinker loop cannot apply is
refused, naming the field: stop strings (the talker would speak past them), logit bias and
penalties, response formats and forced tool calls (logits processors), logprobs. Batch-1, as
mlx-vlm's talker is; the thinker phase holds the MLX thread for the whole answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from protocol.inputs import ChatInputs
from protocol.messages import Delta, FinishReason
from worker.runtime.errors import bad_request
from worker.text.request import TextRequest
from worker.vision.model import VisionModel
from worker.vision.prompt import VisionInputs

SAMPLE_RATE = 24000  # Qwen3-Omni's code2wav
_PASSED_TENSORS = ("input_features", "feature_attention_mask", "audio_feature_lengths",
                   "pixel_values", "pixel_values_videos", "image_grid_thw", "video_grid_thw")  # fmt: skip


def talker_speakers(vm: VisionModel) -> list[str]:
    """The speakers of the model's talker (its config's `speaker_id`), [] without one."""
    model = vm.model
    if not getattr(model, "has_talker", False):
        return []
    return [name.capitalize() for name in model.config.talker_config.speaker_id]


def check_talker_request(vm: VisionModel, inputs: ChatInputs, request: TextRequest) -> None:
    """RequestError naming what this path cannot honour (see the module docstring)."""
    speaker = inputs.talker_speaker or ""
    if speaker.lower() not in {s.lower() for s in talker_speakers(vm)}:
        known = ", ".join(talker_speakers(vm)) or "none: this model has no talker"
        raise bad_request(f"speaker {speaker!r} is not one of the talker's ({known})")
    sampling = inputs.sampling
    if sampling.stop:
        raise bad_request("stop strings with the model's own voice (it would speak past them)")
    if sampling.logprobs is not None:
        raise bad_request("logprobs with the model's own voice")
    # A lazy grammar of bare calls (constraints/bare_calls.py) is the server's own aid, not
    # something the request asked for: the talker goes without it.
    if any(not getattr(p, "guards_only", False) for p in request.logits_processors):
        raise bad_request(
            "logit_bias, penalties, response_format and forced tool calls are not applied "
            "by the talker's thinker loop"
        )


class TalkerGeneration:
    """One spoken request: mlx-vlm's generate_stream, advanced one yield a step."""

    def __init__(self, request: TextRequest, inputs: VisionInputs, chat: ChatInputs,
                 eos_token_id: int, max_frames: int) -> None:  # fmt: skip
        self._max_frames = max_frames  # --talker-max-frames (mlx-vlm's default 4096: 5.5 min)
        self.request = request
        self.lease = None  # no conversation cache on this path
        self.uses_apc = False
        self.looked_up = True  # no prefix cache lookup to count
        self._inputs = inputs
        self._chat = chat
        self._eos = eos_token_id
        self._results: Any = None
        self._finish: Delta | None = None  # the text's terminal, held until the audio ends

    def _start(self, vm: VisionModel) -> None:
        s = self._chat.sampling
        temperature = s.temperature if s.temperature is not None else 0.0
        top_p = s.top_p if s.top_p is not None else 1.0
        tensors = self._inputs.tensors
        kwargs = {k: tensors[k] for k in _PASSED_TENSORS if tensors.get(k) is not None}
        self._results = vm.model.generate_stream(
            tensors["input_ids"],
            speaker=self._chat.talker_speaker,
            thinker_max_new_tokens=self.request.max_tokens,
            thinker_eos_token_id=self._eos,
            talker_max_new_tokens=self._max_frames,
            talker_temperature=temperature,
            talker_top_p=top_p,
            thinker_temperature=temperature,
            thinker_top_p=top_p,
            thinker_top_k=s.top_k or 0,
            thinker_min_p=s.min_p or 0.0,
            **kwargs,
        )

    def advance(self, vm: VisionModel, state: Any) -> list[Delta]:
        if self._results is None:
            self._start(vm)
        state.put(state.fresh())
        try:
            kind, value = next(self._results)
        except StopIteration:
            return [self._end()]
        if kind == "text":
            return self._text(value)
        samples = np.asarray(value, dtype=np.float32).reshape(-1)
        if not samples.size:
            return []
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        return [Delta(self.request.request_id, audio=pcm, sample_rate=SAMPLE_RATE)]

    def _text(self, tokens: list[int]) -> list[Delta]:
        deltas = []
        for token in tokens:
            delta = self.request.accept(int(token))
            if delta.finish_reason is not None:
                self._finish = Delta(self.request.request_id, finish_reason=delta.finish_reason,
                                     usage=delta.usage)  # fmt: skip
                delta.finish_reason, delta.usage = None, None
                deltas.append(delta)
                break
            deltas.append(delta)
        return deltas

    def _end(self) -> Delta:
        self.close()
        if self._finish is not None:
            return self._finish
        return self.request.end(FinishReason.LENGTH)  # the thinker stopped at its budget

    def close(self) -> None:
        if self._results is not None:
            self._results.close()
            self._results = None
