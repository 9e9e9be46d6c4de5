"""The schemas of what the routes answer (`COMPONENTS`, for /openapi.json's
`components.schemas`), joined from gateway/openapi/components/ (one module per API area,
written with gateway/openapi/schema_builders.py).

The shapes are the ones the code builds, not OpenAI's or Anthropic's documents: the routes
(gateway/routes/), the stream encoders (gateway/openai/chunks.py, gateway/anthropic/events.py,
gateway/responses/events.py, gateway/audio/speech/stream.py, gateway/audio/transcription/
stream.py) and the body builders they call. Policy: `required` lists the keys a body always
has; objects leave `additionalProperties` open (fields may be added); null is allowed exactly
where the code can send null. Which operation answers which of them, by status:
responses.py.
"""

from __future__ import annotations

from gateway.openapi.components import (
    admin,
    anthropic,
    audio,
    chat,
    embeddings,
    responses_api,
    server,
)
from gateway.openapi.components.responses_api import RESPONSE_EVENTS
from gateway.openapi.schema_builders import Schema

__all__ = ["COMPONENTS", "RESPONSE_EVENTS", "Schema", "ref"]

COMPONENTS: dict[str, Schema] = {
    **server.SCHEMAS,
    **chat.SCHEMAS,
    **anthropic.SCHEMAS,
    **responses_api.SCHEMAS,
    **audio.SCHEMAS,
    **embeddings.SCHEMAS,
    **admin.SCHEMAS,
}


def ref(name: str) -> Schema:
    """A reference to `COMPONENTS[name]`."""
    if name not in COMPONENTS:
        raise KeyError(f"no component schema {name!r}")
    return {"$ref": f"#/components/schemas/{name}"}
