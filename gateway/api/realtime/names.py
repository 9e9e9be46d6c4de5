"""The names that differ between the Realtime API's GA interface and its beta (a client sends
`OpenAI-Beta: realtime=v1` for the beta). Everything else is named alike."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Names:
    beta: bool
    text_delta: str
    text_done: str
    audio_delta: str
    audio_done: str
    transcript_delta: str
    transcript_done: str
    item_added: str  # GA: conversation.item.added, then .done; beta: .created only
    text_part: str  # an assistant message's content part types
    audio_part: str


GA = Names(
    beta=False,
    text_delta="response.output_text.delta",
    text_done="response.output_text.done",
    audio_delta="response.output_audio.delta",
    audio_done="response.output_audio.done",
    transcript_delta="response.output_audio_transcript.delta",
    transcript_done="response.output_audio_transcript.done",
    item_added="conversation.item.added",
    text_part="output_text",
    audio_part="output_audio",
)
BETA = Names(
    beta=True,
    text_delta="response.text.delta",
    text_done="response.text.done",
    audio_delta="response.audio.delta",
    audio_done="response.audio.done",
    transcript_delta="response.audio_transcript.delta",
    transcript_done="response.audio_transcript.done",
    item_added="conversation.item.created",
    text_part="text",
    audio_part="audio",
)


def names_for(headers) -> Names:
    """The beta interface when the client asks for it by header, else GA."""
    return BETA if "realtime=v1" in headers.get("openai-beta", "") else GA
