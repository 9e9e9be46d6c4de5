"""The video API's paths (videos.py)."""

from starlette.routing import Route

from gateway.api.videos import videos

ROUTES = [
    Route("/v1/videos", videos.create, methods=["POST"]),
    Route("/v1/videos", videos.listed, methods=["GET"]),
    Route("/v1/videos/{video_id}", videos.retrieve, methods=["GET"]),
    Route("/v1/videos/{video_id}", videos.delete, methods=["DELETE"]),
    Route("/v1/videos/{video_id}/content", videos.content, methods=["GET"]),
]
