"""Spoken test sentences for real speech recognition: espeak-ng speech, sox concatenation,
word error rate.

The voice and rate were chosen by measuring (`python -m tests.weights.measure_wer`; the table
is in docs/speech.md, "Real weights"): espeak-ng's `en-us` voice at 130 words a minute, which
with Whisper tiny.en had the lowest word error rate of the voices and rates tried but one
(`en+f3`, within two words of it, and worse on an earlier set of sentences).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

VOICE, RATE = "en-us", 130  # espeak-ng -v VOICE -s RATE

# Ten everyday sentences without digits (so "ten" / "10" cannot count as an error).
SENTENCES = (
    "The weather is nice today, so we will go for a walk in the park.",
    "Please send me the report before the meeting on Friday morning.",
    "My sister plays the piano every evening after dinner.",
    "She bought fresh bread, cheese and apples at the market.",
    "Our train leaves from the central station at noon.",
    "Can you turn off the lights when you leave the room?",
    "The children played football in the garden after school.",
    "I would like a cup of coffee with milk and no sugar.",
    "The library is closed on Sundays and public holidays.",
    "He forgot his umbrella and got wet in the rain.",
)

# Twelve more for a recording of about two minutes (with SENTENCES, at RATE).
MORE_SENTENCES = (
    "Every morning the old baker opens his shop before sunrise.",
    "The museum has a large collection of paintings and ancient maps.",
    "We planted tomatoes, beans and carrots in the vegetable garden.",
    "The pilot told the passengers to fasten their seat belts.",
    "A small boat sailed slowly across the quiet lake.",
    "The students listened carefully while the teacher explained the lesson.",
    "My neighbor walks his dog along the beach every afternoon.",
    "The kitchen smells of fresh soup and warm bread.",
    "They watched the stars from the top of the hill.",
    "The bus was late because of the heavy snow.",
    "Please remember to water the flowers while I am away.",
    "The concert ended with a long and beautiful song.",
)


def require(*tools: str) -> None:
    """Skip, naming the package, when a command-line tool is missing."""
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install {tool})")


def speak(path: Path, text: str, voice: str = VOICE, rate: int = RATE) -> Path:
    """`text` spoken by espeak-ng into a WAV file (22.05 kHz mono)."""
    require("espeak-ng")
    command = ["espeak-ng", "-v", voice, "-s", str(rate), "-w", str(path), text]
    subprocess.run(command, check=True, capture_output=True)
    return path


def pcm24k(text: str, lead_s: float = 0.6, tail_s: float = 1.2) -> bytes:
    """espeak-ng's speech of `text` as 24 kHz PCM16, with silence before and after."""
    wav = subprocess.run(["espeak-ng", "-v", VOICE, "-s", str(RATE), "--stdout", text],
                         capture_output=True, check=True).stdout  # fmt: skip
    return subprocess.run(
        ["sox", "-t", "wav", "-", "-t", "raw", "-r", "24000", "-c", "1", "-b", "16",
         "-e", "signed-integer", "-", "pad", str(lead_s), str(tail_s)],
        input=wav, capture_output=True, check=True,
    ).stdout  # fmt: skip


def loud_span_ms(pcm: bytes) -> tuple[int, int]:
    """Where the speech is: the first and last sample above -40 dBFS, in ms."""
    loud = np.flatnonzero(np.abs(np.frombuffer(pcm, "<i2")) > 328)
    return int(loud[0]) // 24, int(loud[-1]) // 24


def concatenate(path: Path, parts: list[Path], gap: float = 0.0) -> Path:
    """The WAV files one after another with `gap` seconds of silence between them (sox), into
    `path`; the parts share one sample rate (espeak-ng's)."""
    require("sox")
    files = [str(parts[0])]
    if gap > 0:
        silence = path.with_name(f"{path.stem}-gap.wav")
        rate = _soxi("-r", parts[0])
        command = ["sox", "-n", "-r", rate, "-c", "1", "-b", "16", str(silence), "trim", "0"]
        subprocess.run([*command, str(gap)], check=True, capture_output=True)
        for part in parts[1:]:
            files += [str(silence), str(part)]
    else:
        files += map(str, parts[1:])
    subprocess.run(["sox", *files, str(path)], check=True, capture_output=True)
    return path


def seconds(path: Path) -> float:
    return float(_soxi("-D", path))


def _soxi(option: str, path: Path) -> str:
    require("sox")
    command = ["soxi", option, str(path)]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def words(text: str) -> list[str]:
    """Lower-case words: punctuation dropped, hyphens split, apostrophes kept."""
    return re.findall(r"[a-z0-9']+", text.lower().replace("-", " "))


def word_errors(reference: str, hypothesis: str) -> int:
    """Substitutions + deletions + insertions turning the reference's words into the
    hypothesis's (Levenshtein distance over words)."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (r != h))
    return row[len(hyp)]


def word_error_rate(pairs: Iterable[tuple[str, str]]) -> float:
    """Corpus WER of (reference, hypothesis) pairs: all errors over all reference words."""
    errors = total = 0
    for reference, hypothesis in pairs:
        errors += word_errors(reference, hypothesis)
        total += len(words(reference))
    return errors / total
