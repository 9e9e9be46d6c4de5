"""Worker counters: written by the MLX thread, read by the IO threads (stats calls, heartbeats).

Besides the scheduler's request and token counts, the engines count their own work where it
happens (once the scheduler bound them to these stats, see `Scheduler`): prefix-cache lookups
in tokens, as vLLM counts them (queried = the prompt's tokens, hit = those reused from the
cache; worker/text/prefix_reuse.py, worker/vision/engine.py), prompt tokens prefilled inside
decode steps and speculative decoding's drafts and accepted tokens (worker/text/batch_engine.py),
seconds of speech sent (worker/speech/engine.py) and the voice cache's lookups
(worker/speech/voice_cache.py), seconds of audio transcribed (worker/transcription/engine.py)
and denoising steps of image generation with their time (worker/images/engine.py).
Every counter is a total since the worker started; the gateway's /metrics carries them over
worker restarts (gateway/metrics/worker.py).
"""

from __future__ import annotations

import os
import threading

from protocol.messages import WorkerCounters


class WorkerStats:
    """Thread-safe counters and the current queue, snapshot as the `stats` control reply."""

    def __init__(self, model: str) -> None:
        self._lock = threading.Lock()
        self._model = model
        self._active_ids: tuple[str, ...] = ()
        self._waiting = 0
        self._requests_total = 0
        self._requests_aborted = 0
        self._tokens_generated = 0
        self._prompt_tokens = 0
        self._prefix_cache_queries = 0
        self._prefix_cache_hits = 0
        self._prefill_in_decode = 0
        # Speculative decoding, as vLLM counts it (worker/text/speculation/counters.py)
        self._spec_drafts = 0
        self._spec_draft_tokens = 0
        self._spec_accepted = 0
        self._spec_accepted_per_pos: list[int] = []
        self._speech_seconds = 0.0
        self._voice_cache = [0, 0, 0]  # prefix tokens queried, hit; entries evicted
        self._transcribed_seconds = 0.0
        self._image_steps = 0
        self._image_step_seconds = 0.0
        self._video_steps = 0
        self._video_step_seconds = 0.0

    def set_queue(self, active_ids: list[str], waiting: int) -> None:
        with self._lock:
            self._active_ids = tuple(active_ids)
            self._waiting = waiting

    def count_request(self) -> None:
        with self._lock:
            self._requests_total += 1

    def count_abort(self) -> None:
        with self._lock:
            self._requests_aborted += 1

    def count_tokens(self, prompt: int = 0, generated: int = 0) -> None:
        with self._lock:
            self._prompt_tokens += prompt
            self._tokens_generated += generated

    def count_prefix_cache(self, queried: int, hit: int) -> None:
        """One prefix-cache lookup: `queried` prompt tokens, `hit` of them reused."""
        with self._lock:
            self._prefix_cache_queries += queried
            self._prefix_cache_hits += hit

    def count_prefill_in_decode(self, tokens: int) -> None:
        """Prompt tokens prefilled inside decode steps' forward passes (fused_generator.py)."""
        with self._lock:
            self._prefill_in_decode += tokens

    def count_speculation(
        self, drafts: int, draft_tokens: int, accepted: int, accepted_per_position: list[int]
    ) -> None:
        """Verifications of proposed tokens: drafts (one sequence's proposals in one step),
        their tokens, those accepted, and how often the token at each position was."""
        with self._lock:
            self._spec_drafts += drafts
            self._spec_draft_tokens += draft_tokens
            self._spec_accepted += accepted
            per_pos = self._spec_accepted_per_pos
            per_pos.extend([0] * (len(accepted_per_position) - len(per_pos)))
            for j, n in enumerate(accepted_per_position):
                per_pos[j] += n

    def count_speech(self, seconds: float) -> None:
        with self._lock:
            self._speech_seconds += seconds

    def count_voice_cache(self, queried: int, hit: int, evicted: int) -> None:
        """Qwen3-TTS's voice cache (worker/speech/voice_cache.py): a prefill's tokens
        (`queried`), its voice prefix's tokens whose KV was reused (`hit`), entries evicted."""
        with self._lock:
            for i, n in enumerate((queried, hit, evicted)):
                self._voice_cache[i] += n

    def count_transcribed(self, seconds: float) -> None:
        with self._lock:
            self._transcribed_seconds += seconds

    def count_image_step(self, seconds: float) -> None:
        """One denoising step of image generation and the time it took."""
        with self._lock:
            self._image_steps += 1
            self._image_step_seconds += seconds

    def count_video_step(self, seconds: float) -> None:
        """One denoising step of video generation and the time it took."""
        with self._lock:
            self._video_steps += 1
            self._video_step_seconds += seconds

    def load(self) -> tuple[int, int]:
        """(active, waiting), for heartbeats."""
        with self._lock:
            return len(self._active_ids), self._waiting

    def snapshot(self) -> WorkerCounters:
        with self._lock:
            return WorkerCounters(
                model=self._model,
                pid=os.getpid(),
                active=len(self._active_ids),
                waiting=self._waiting,
                active_request_ids=list(self._active_ids),
                requests_total=self._requests_total,
                requests_aborted=self._requests_aborted,
                tokens_generated=self._tokens_generated,
                prompt_tokens=self._prompt_tokens,
                prefix_cache_queries=self._prefix_cache_queries,
                prefix_cache_hits=self._prefix_cache_hits,
                prefill_tokens_in_decode_steps=self._prefill_in_decode,
                speech_seconds=self._speech_seconds,
                voice_cache_queries=self._voice_cache[0],
                voice_cache_hits=self._voice_cache[1],
                voice_cache_evictions=self._voice_cache[2],
                transcribed_seconds=self._transcribed_seconds,
                spec_decode_num_drafts=self._spec_drafts,
                spec_decode_num_draft_tokens=self._spec_draft_tokens,
                spec_decode_num_accepted_tokens=self._spec_accepted,
                spec_decode_num_accepted_tokens_per_pos=list(self._spec_accepted_per_pos),
                image_steps=self._image_steps,
                image_step_seconds=self._image_step_seconds,
                video_steps=self._video_steps,
                video_step_seconds=self._video_step_seconds,
            )
