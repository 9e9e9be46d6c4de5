"""HTTP routes, one module per API family; `ROUTES` is what the app mounts."""

from starlette.routing import Route, WebSocketRoute

from gateway.routes import (
    admin,
    chat,
    completions,
    embeddings,
    health,
    messages,
    metrics,
    models,
    openapi,
    realtime,
    rerank,
    responses,
    root,
    speech,
    speech_stream,
    tokenize,
    transcriptions,
)

ROUTES = [
    Route("/", root.root, methods=["GET", "HEAD"]),
    Route("/v1", root.root, methods=["GET", "HEAD"]),
    Route("/health", health.health, methods=["GET"]),
    Route("/openapi.json", openapi.openapi_json, methods=["GET"]),
    Route("/docs", openapi.docs_page, methods=["GET", "HEAD"]),
    Route("/metrics", metrics.metrics, methods=["GET"]),
    Route("/v1/models", models.list_models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", models.get_model, methods=["GET"]),
    Route("/v1/chat/completions", chat.chat_completions, methods=["POST"]),
    Route("/v1/completions", completions.completions, methods=["POST"]),
    Route("/v1/messages", messages.create_message, methods=["POST"]),
    Route("/v1/messages/count_tokens", messages.count_tokens, methods=["POST"]),
    Route("/v1/responses", responses.create_response, methods=["POST"]),
    Route("/v1/responses/{response_id}", responses.get_response, methods=["GET"]),
    Route("/v1/responses/{response_id}", responses.delete_response, methods=["DELETE"]),
    Route("/v1/audio/speech", speech.speech, methods=["POST"]),
    WebSocketRoute("/v1/audio/speech/stream", speech_stream.speech_stream),
    WebSocketRoute("/v1/realtime", realtime.realtime),
    Route("/v1/audio/voices", speech.voices, methods=["GET"]),
    Route("/v1/audio/voices", speech.create_voice, methods=["POST"]),
    Route("/v1/audio/voices/{voice_id}", speech.delete_voice, methods=["DELETE"]),
    Route("/v1/audio/transcriptions", transcriptions.transcriptions, methods=["POST"]),
    Route("/v1/audio/translations", transcriptions.translations, methods=["POST"]),
    Route("/v1/embeddings", embeddings.embeddings, methods=["POST"]),
    # vLLM serves both without the /v1 prefix too; /v2/rerank is Cohere's v2 path.
    *(
        Route(path, rerank.rerank, methods=["POST"])
        for path in ("/v1/rerank", "/v2/rerank", "/rerank")
    ),
    *(Route(path, rerank.score, methods=["POST"]) for path in ("/v1/score", "/score")),
    # vLLM's tokenizer endpoints, at vLLM's paths (it has no /v1 ones).
    Route("/tokenize", tokenize.tokenize, methods=["POST"]),
    Route("/detokenize", tokenize.detokenize, methods=["POST"]),
    Route("/v1/admin/models/load", admin.load_model, methods=["POST"]),
    Route("/v1/admin/models/unload", admin.unload_model, methods=["POST"]),
    Route("/v1/admin/models/pin", admin.pin_model, methods=["POST"]),
    Route("/v1/admin/stats", admin.stats, methods=["GET"]),
]
