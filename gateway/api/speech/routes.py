"""The speech API's paths: `/v1/audio/speech` and the voices (speech.py), and the speech
WebSocket `/v1/audio/speech/stream` (websocket.py)."""

from starlette.routing import Route, WebSocketRoute

from gateway.api.speech import speech, websocket

ROUTES = [
    Route("/v1/audio/speech", speech.speech, methods=["POST"]),
    WebSocketRoute("/v1/audio/speech/stream", websocket.speech_stream),
    Route("/v1/audio/voices", speech.voices, methods=["GET"]),
    Route("/v1/audio/voices", speech.create_voice, methods=["POST"]),
    Route("/v1/audio/voices/{voice_id}", speech.delete_voice, methods=["DELETE"]),
]
