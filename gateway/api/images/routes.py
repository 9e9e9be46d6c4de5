"""The Images API's paths (images.py)."""

from starlette.routing import Route

from gateway.api.images import images

ROUTES = [
    Route("/v1/images/generations", images.generations, methods=["POST"]),
    Route("/v1/images/edits", images.edits, methods=["POST"]),
]
