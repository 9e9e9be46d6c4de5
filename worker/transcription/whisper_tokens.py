"""mlx-audio's Whisper tokenizer with its no-speech token id looked up once per tokenizer.

`HFTokenizerWrapper.no_speech` (mlx_audio/stt/models/whisper/whisper.py) copies the whole
vocabulary (`get_vocab()`, ~51.9k entries, ~17 ms on this CPU) every time it is read, and each
window's decoding reads it four times (twice for its suppressed tokens, twice at its first
step) while nothing else runs: ~70 ms of every window. The id never changes for a tokenizer,
so `install()` makes the property read mlx-audio's own lookup once per underlying tokenizer and
keep the answer: the same id, so the same decoding
(tests/unit/test_transcription_whisper_tokens.py).
"""

from __future__ import annotations

import weakref
from typing import Any

# mlx-audio's own property, kept by `install()` (the tests compare the two).
STOCK_NO_SPEECH: Any = None
_ids: weakref.WeakKeyDictionary[Any, int | None] = weakref.WeakKeyDictionary()


def _no_speech(self: Any) -> int | None:
    """The no-speech token id of this wrapper's tokenizer, by mlx-audio's lookup, once."""
    tokenizer = self.hf_tokenizer
    try:
        if tokenizer not in _ids:
            _ids[tokenizer] = STOCK_NO_SPEECH.fget(self)
        return _ids[tokenizer]
    except TypeError:  # a tokenizer that cannot be weakly referenced: looked up every time
        return STOCK_NO_SPEECH.fget(self)


def install() -> None:
    """Give HFTokenizerWrapper the looked-up-once `no_speech` (idempotent)."""
    from mlx_audio.stt.models.whisper.whisper import HFTokenizerWrapper

    global STOCK_NO_SPEECH
    if STOCK_NO_SPEECH is None:
        STOCK_NO_SPEECH = HFTokenizerWrapper.no_speech
        HFTokenizerWrapper.no_speech = property(_no_speech, doc=STOCK_NO_SPEECH.__doc__)


def uninstall() -> None:
    """Give HFTokenizerWrapper mlx-audio's own property back."""
    from mlx_audio.stt.models.whisper.whisper import HFTokenizerWrapper

    global STOCK_NO_SPEECH
    if STOCK_NO_SPEECH is not None:
        HFTokenizerWrapper.no_speech = STOCK_NO_SPEECH
        STOCK_NO_SPEECH = None
