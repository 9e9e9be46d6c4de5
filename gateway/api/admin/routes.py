"""The server's own paths: the base URL (root.py), `/health`, `/metrics`, the model list
(models.py) and the admin routes (admin.py: load, unload, pin, stats; adapters.py: LoRA
adapters)."""

from starlette.routing import Route

from gateway.api.admin import adapters, admin, health, metrics, models, root

ROUTES = [
    Route("/", root.root, methods=["GET", "HEAD"]),
    Route("/v1", root.root, methods=["GET", "HEAD"]),
    Route("/health", health.health, methods=["GET"]),
    Route("/metrics", metrics.metrics, methods=["GET"]),
    Route("/v1/models", models.list_models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", models.get_model, methods=["GET"]),
    Route("/v1/admin/models/load", admin.load_model, methods=["POST"]),
    Route("/v1/admin/models/unload", admin.unload_model, methods=["POST"]),
    Route("/v1/admin/models/pin", admin.pin_model, methods=["POST"]),
    Route("/v1/admin/stats", admin.stats, methods=["GET"]),
    Route("/v1/load_lora_adapter", adapters.load_lora_adapter, methods=["POST"]),
    Route("/v1/unload_lora_adapter", adapters.unload_lora_adapter, methods=["POST"]),
]
