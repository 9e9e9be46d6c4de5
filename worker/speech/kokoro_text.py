"""Kokoro's text front end: text -> phonemes (a G2P per language) -> chunks it can speak.

Kokoro reads phonemes, at most 510 per call (its ALBERT has 512 positions, two of them the
boundary tokens). mlx-audio's pipeline phonemizes English with misaki's lexicon G2P, which
needs spaCy, its English model (a download) and PyTorch, and cuts anything longer than 510
phonemes off with a warning. Here:

- a language's G2P is misaki's own where it loads (English with spaCy's `en_core_web_sm`
  installed; Japanese with misaki[ja]; Chinese with misaki[zh]), else misaki's espeak-ng mode
  (`EspeakG2P`, over the libespeak-ng that espeakng-loader ships: no download, no PyTorch),
  which speaks English as well as mlx-audio's espeak languages (es, fr, hi, it, pt-br);
- American English flaps are Kokoro's `T` (what mlx-audio's pipeline does to misaki's output);
- the phonemes are spoken a sentence per chunk, so that streamed speech starts after the first
  sentence; a sentence longer than 510 is cut at its last clause mark (`:;`, then `,—`), then at
  a word, that fits; only a "word" longer than 510 phonemes is cut inside. Nothing is dropped.

No MLX here (unit-tested on its own).
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_PHONEMES = 510
_SENTENCE = re.compile(r"(?<=[.!?…])\s+")  # a sentence mark, then a space: a new sentence
_CUTS = (":;", ",—", " ")  # where a long sentence is cut, most natural first

# mlx-audio's language codes (its pipeline's ALIASES and LANG_CODES): the espeak-ng voice each
# is spoken with when misaki's own G2P for it does not load.
ESPEAK_VOICES = {
    "a": "en-us",
    "b": "en-gb",
    "e": "es",
    "f": "fr-fr",
    "h": "hi",
    "i": "it",
    "p": "pt-br",
}
ALIASES = {
    "en": "a", "en-us": "a", "en-gb": "b", "es": "e", "fr-fr": "f", "fr": "f", "hi": "h",
    "it": "i", "pt-br": "p", "pt": "p", "ja": "j", "zh": "z",
}  # fmt: skip
_MISAKI = {"j": ("misaki.ja", "misaki[ja]"), "z": ("misaki.zh", "misaki[zh]")}
ESPEAK_NEEDS = "misaki, phonemizer-fork and espeakng-loader"


def language_code(language: str) -> str:
    """mlx-audio's one-letter code for a code or one of its aliases ("en-us" -> "a")."""
    lowered = language.lower()
    return ALIASES.get(lowered, lowered)


@dataclass(frozen=True)
class G2P:
    """One language's grapheme-to-phoneme conversion, and which one it is (for the log)."""

    code: str
    label: str
    convert: Callable[[str], object]

    def __call__(self, text: str) -> str:
        result = self.convert(text)
        phonemes = result[0] if isinstance(result, tuple) else result
        phonemes = str(phonemes or "")
        if self.code == "a":
            phonemes = phonemes.replace("ɾ", "T")
        return phonemes


def load_g2p(code: str) -> G2P:
    """The G2P for a language code; ImportError naming what to install when none loads."""
    if code in "ab":
        english = _misaki_english(british=code == "b")
        if english is not None:
            return G2P(code, "misaki (lexicon)", english)
    elif code in _MISAKI:
        module, extra = _MISAKI[code]
        try:
            g2p = importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"needs {extra}") from exc
        return G2P(code, extra, g2p.JAG2P() if code == "j" else g2p.ZHG2P())
    if code not in ESPEAK_VOICES:
        raise ImportError(f"no G2P for language {code!r}")
    try:
        espeak = importlib.import_module("misaki.espeak")
        return G2P(code, f"espeak-ng {ESPEAK_VOICES[code]}",
                   espeak.EspeakG2P(language=ESPEAK_VOICES[code]))  # fmt: skip
    except Exception as exc:  # ImportError, or espeak-ng's library failing to load
        raise ImportError(f"needs {ESPEAK_NEEDS} ({exc})") from exc


def _misaki_english(british: bool) -> Callable[[str], object] | None:
    """misaki's English lexicon G2P when spaCy and its English model are installed (misaki
    would otherwise try to download the model); None if not."""
    try:
        import spacy.util  # type: ignore[import-not-found, unused-ignore]

        if not spacy.util.is_package("en_core_web_sm"):
            return None
        en = importlib.import_module("misaki.en")
        espeak = importlib.import_module("misaki.espeak")
        fallback = espeak.EspeakFallback(british=british)
        g2p: Callable[[str], object] = en.G2P(trf=False, british=british, fallback=fallback, unk="")
        return g2p
    except Exception:  # not installed, or broken: the espeak-ng mode speaks English too
        return None


def chunks(phonemes: str, limit: int = MAX_PHONEMES) -> Iterator[str]:
    """The phonemes a sentence per chunk, each at most `limit` long (see the module
    docstring); chunks with nothing but spaces are left out."""
    for sentence in _SENTENCE.split(phonemes.strip()):
        yield from _fit(sentence.strip(), limit, 0)


def _fit(text: str, limit: int, level: int) -> Iterator[str]:
    if not text:
        return
    if len(text) <= limit:
        yield text
        return
    if level == len(_CUTS):  # one "word" longer than the limit: cut it where it must be
        for start in range(0, len(text), limit):
            yield text[start : start + limit]
        return
    marks = _CUTS[level]
    while len(text) > limit:
        cut = max(text.rfind(mark, 0, limit) for mark in marks)
        if cut <= 0:  # no such mark within the limit: a finer one
            head, _, text = _first_piece(text, marks)
            yield from _fit(head.strip(), limit, level + 1)
        else:
            yield from _fit(text[: cut + 1].strip(), limit, level + 1)
            text = text[cut + 1 :]
        text = text.strip()
    if text:
        yield text


def _first_piece(text: str, marks: str) -> tuple[str, str, str]:
    """`text` up to and including its first mark in `marks` (all of it when none)."""
    found = [i for i in (text.find(mark) for mark in marks) if i >= 0]
    if not found:
        return text, "", ""
    end = min(found) + 1
    return text[:end], "", text[end:]
