"""HTTP routes, one module per API family; `ROUTES` is what the app mounts."""

from starlette.routing import Route

from gateway.routes import admin, chat, completions, health, models

ROUTES = [
    Route("/health", health.health, methods=["GET"]),
    Route("/v1/models", models.list_models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", models.get_model, methods=["GET"]),
    Route("/v1/chat/completions", chat.chat_completions, methods=["POST"]),
    Route("/v1/completions", completions.completions, methods=["POST"]),
    Route("/v1/admin/models/load", admin.load_model, methods=["POST"]),
    Route("/v1/admin/stats", admin.stats, methods=["GET"]),
]
