"""The transcriptions API's paths: `/v1/audio/transcriptions` and `/v1/audio/translations`
(transcriptions.py)."""

from starlette.routing import Route

from gateway.api.transcriptions import transcriptions

ROUTES = [
    Route("/v1/audio/transcriptions", transcriptions.transcriptions, methods=["POST"]),
    Route("/v1/audio/translations", transcriptions.translations, methods=["POST"]),
]
