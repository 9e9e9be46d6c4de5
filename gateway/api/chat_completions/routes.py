"""The chat completions API's paths: `/v1/chat/completions` (chat.py) and `/v1/completions`
(completions.py)."""

from starlette.routing import Route

from gateway.api.chat_completions import chat, completions

ROUTES = [
    Route("/v1/chat/completions", chat.chat_completions, methods=["POST"]),
    Route("/v1/completions", completions.completions, methods=["POST"]),
]
