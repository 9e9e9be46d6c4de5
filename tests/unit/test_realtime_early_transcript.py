"""A realtime turn's transcription starts 200 ms into its closing silence, before the server
VAD ends the turn; a shorter dip starts nothing; speech that resumes, a clear, a commit or new
transcription settings cancel that pass; the transcript is always of the turn up to 200 ms into
that silence, however the audio was cut into appends.

The session runs with a scripted VAD (speech where the samples are loud) and a recorder for a
speech recognizer that says how much audio it was given."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import wave
from types import SimpleNamespace

import numpy as np

from gateway.api.realtime.names import GA
from gateway.api.realtime.session import Session
from gateway.api.realtime.transcription import EARLY_AFTER_MS
from gateway.api.realtime.vad import TurnDetector, TurnSettings
from protocol.messages import Delta, FinishReason

SILENCE_MS = 320


class Loud:
    def __call__(self, window: np.ndarray) -> float:
        return float(np.abs(window).max() > 0.1)


class Socket:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.app = SimpleNamespace(state=SimpleNamespace(pool=None))

    async def send_text(self, text: str) -> None:
        self.events.append(json.loads(text))

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]


class Recognizer:
    """Answers "<ms of audio heard>"; notes when each request came and how it ended."""

    ready_info = SimpleNamespace(transcription=object())

    def __init__(self, socket: Socket, seconds: float) -> None:
        self.socket, self.seconds = socket, seconds
        self.requests: list[dict] = []

    @contextlib.asynccontextmanager
    async def request(self, inputs, stream: bool):
        with wave.open(io.BytesIO(inputs.audio)) as wav:
            heard_ms = wav.getnframes() * 1000 // wav.getframerate()
        record = {"ms": heard_ms, "after": list(self.socket.kinds()), "ended": "aborted",
                  "language": inputs.language}  # fmt: skip
        self.requests.append(record)

        async def batches():
            await asyncio.sleep(self.seconds)
            yield [Delta(request_id="r", text=f"{heard_ms} ms")]
            record["ended"] = "finished"
            yield [Delta(request_id="r", finish_reason=FinishReason.STOP)]

        yield batches()


def pcm(seconds: float, loud: bool) -> bytes:
    samples = np.full(int(seconds * 24000), 0.5 if loud else 0.0)
    return (samples * 32767).astype("<i2").tobytes()


def session(recognize_s: float = 0.05) -> tuple[Session, Socket, Recognizer]:
    socket = Socket()
    asr = Recognizer(socket, recognize_s)
    s = Session(socket, GA, "chat", asr)  # type: ignore[arg-type]
    assert s.config.turn_detection is not None
    s.config.turn_detection.create_response = False
    s.config.transcription = {"language": "en"}
    settings = TurnSettings(prefix_padding_ms=0, silence_duration_ms=SILENCE_MS)
    s.input.detector = TurnDetector(Loud(), settings)  # type: ignore[arg-type]
    return s, socket, asr


async def speak(s: Session, audio: bytes, chunk_ms: int = 100) -> None:
    """Append like a microphone: `chunk_ms` at a time, the loop free in between."""
    step = 48 * chunk_ms
    for at in range(0, len(audio), step):
        piece = base64.b64encode(audio[at : at + step]).decode()
        await s.handle({"type": "input_audio_buffer.append", "audio": piece})
        await asyncio.sleep(0.005)


async def transcribed(socket: Socket) -> dict:
    while "conversation.item.input_audio_transcription.completed" not in socket.kinds():
        await asyncio.sleep(0.01)
    return next(
        e for e in socket.events
        if e["type"] == "conversation.item.input_audio_transcription.completed"
    )  # fmt: skip


def stopped(socket: Socket) -> dict:
    return next(e for e in socket.events if e["type"] == "input_audio_buffer.speech_stopped")


def test_the_transcription_starts_when_the_silence_begins_not_when_the_turn_ends():
    async def run():
        s, socket, asr = session()
        await speak(s, pcm(0.3, False) + pcm(1.0, True) + pcm(0.6, False))
        done = await transcribed(socket)
        await s.close()
        return socket, asr, done

    socket, asr, done = asyncio.run(run())
    assert len(asr.requests) == 1, asr.requests
    request = asr.requests[0]
    # Asked for before the VAD ended the turn, and it finished.
    assert "input_audio_buffer.speech_stopped" not in request["after"]
    assert "input_audio_buffer.speech_started" in request["after"]
    assert request["ended"] == "finished"
    # It heard the turn up to 200 ms into the silence (which begins at a 32 ms window of the
    # VAD), not the whole silence that ended the turn; the item's turn runs to its end.
    start = next(e for e in socket.events if e["type"] == "input_audio_buffer.speech_started")
    speech_ms = 1300 - start["audio_start_ms"]
    assert speech_ms + EARLY_AFTER_MS <= request["ms"] <= speech_ms + EARLY_AFTER_MS + 32
    turn_ms = stopped(socket)["audio_end_ms"] - start["audio_start_ms"]
    assert turn_ms >= request["ms"] + SILENCE_MS - EARLY_AFTER_MS
    assert done["transcript"] == f"{request['ms']} ms"
    assert done["usage"]["seconds"] == turn_ms / 1000
    kinds = socket.kinds()
    assert kinds.index("input_audio_buffer.committed") < kinds.index(
        "conversation.item.input_audio_transcription.delta"
    )


def test_speech_that_resumes_cancels_the_early_pass_and_the_next_silence_starts_another():
    async def run():
        s, socket, asr = session(recognize_s=0.5)  # still running when the speech resumes
        # A 100 ms dip (as between words) starts nothing; a 300 ms pause (under the 320 ms
        # that end the turn) starts a pass, which the speech that resumes cancels.
        audio = pcm(0.2, False) + pcm(0.4, True) + pcm(0.1, False) + pcm(0.3, True)
        audio += pcm(0.3, False) + pcm(0.6, True)
        await speak(s, audio + pcm(0.6, False))
        done = await transcribed(socket)
        await s.close()
        return socket, asr, done

    socket, asr, done = asyncio.run(run())
    assert [r["ended"] for r in asr.requests] == ["aborted", "finished"], asr.requests
    first, second = asr.requests
    assert 1000 <= first["ms"] <= 1032 and second["ms"] >= 1900  # cut 200 ms into each pause
    assert done["transcript"] == f"{second['ms']} ms"
    assert socket.kinds().count("input_audio_buffer.speech_stopped") == 1


def test_a_turn_sent_in_one_append_is_transcribed_up_to_its_silence_too():
    async def run():
        s, socket, asr = session()
        await speak(s, pcm(0.3, False) + pcm(1.0, True) + pcm(0.6, False), chunk_ms=2000)
        done = await transcribed(socket)
        await s.close()
        return socket, asr, done

    socket, asr, done = asyncio.run(run())
    assert len(asr.requests) == 1
    request = asr.requests[0]
    assert "input_audio_buffer.speech_stopped" in request["after"]  # no early pass
    start = next(e for e in socket.events if e["type"] == "input_audio_buffer.speech_started")
    speech_ms = 1300 - start["audio_start_ms"]
    assert speech_ms + EARLY_AFTER_MS <= request["ms"] <= speech_ms + EARLY_AFTER_MS + 32
    assert done["transcript"] == f"{request['ms']} ms"


def test_a_clear_while_the_silence_lasts_cancels_the_early_pass():
    async def run():
        s, socket, asr = session(recognize_s=5)
        await speak(s, pcm(0.2, False) + pcm(0.6, True) + pcm(0.3, False))
        assert len(asr.requests) == 1
        await s.handle({"type": "input_audio_buffer.clear"})
        await s.close()
        return socket, asr

    socket, asr = asyncio.run(run())
    assert [r["ended"] for r in asr.requests] == ["aborted"]
    assert "conversation.item.input_audio_transcription.completed" not in socket.kinds()


def test_a_commit_by_hand_drops_the_pass_and_transcribes_the_whole_buffer():
    async def run():
        s, socket, asr = session(recognize_s=0.2)
        await speak(s, pcm(0.2, False) + pcm(0.6, True) + pcm(0.3, False))
        await s.handle({"type": "input_audio_buffer.commit"})
        done = await transcribed(socket)
        await s.close()
        return asr, done

    asr, done = asyncio.run(run())
    assert [r["ended"] for r in asr.requests] == ["aborted", "finished"], asr.requests
    assert done["transcript"] == f"{asr.requests[1]['ms']} ms"
    assert asr.requests[1]["ms"] > asr.requests[0]["ms"]  # the whole buffer, not the pass's cut


def test_new_transcription_settings_during_the_pause_start_the_pass_again():
    async def run():
        s, socket, asr = session(recognize_s=0.2)
        await speak(s, pcm(0.2, False) + pcm(0.6, True) + pcm(0.24, False))
        assert len(asr.requests) == 1
        s.config.transcription = {"language": "fr"}  # as a session.update would set it
        await speak(s, pcm(0.4, False))
        done = await transcribed(socket)
        await s.close()
        return asr, done

    asr, done = asyncio.run(run())
    assert [r["ended"] for r in asr.requests] == ["aborted", "finished"], asr.requests
    assert [r["language"] for r in asr.requests] == ["en", "fr"]
    assert done["transcript"] == f"{asr.requests[1]['ms']} ms"
