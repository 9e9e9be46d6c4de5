"""The answers this server spoke (chat completions with audio out), by audio id, so that a
later request's assistant message `audio: {"id"}` can stand for that answer's transcript.

In memory, bounded (the oldest go first) and expiring, like OpenAI's (`expires_at`).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable

TTL_SECONDS = 3600
CAPACITY = 1024


class SpokenAnswers:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._answers: OrderedDict[str, tuple[str, int]] = OrderedDict()  # id -> (text, expiry)

    @staticmethod
    def new_id() -> str:
        return "audio_" + uuid.uuid4().hex

    def expiry(self) -> int:
        return int(self._clock()) + TTL_SECONDS

    def add(self, audio_id: str, transcript: str, expires_at: int) -> None:
        self._answers[audio_id] = (transcript, expires_at)
        self._answers.move_to_end(audio_id)
        while len(self._answers) > CAPACITY:
            self._answers.popitem(last=False)

    def transcript(self, audio_id: str) -> str | None:
        found = self._answers.get(audio_id)
        if found is None:
            return None
        text, expires_at = found
        if self._clock() >= expires_at:
            del self._answers[audio_id]
            return None
        return text
