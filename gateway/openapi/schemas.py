"""The schemas of what the routes answer (`COMPONENTS`, for /openapi.json's
`components.schemas`), joined from each API's schemas.py (gateway/api/*/schemas.py, written with
gateway/schema/builders.py).

The shapes are the ones the code builds, not OpenAI's or Anthropic's documents: the routes
(gateway/api/*/), the stream encoders (gateway/api/chat_completions/chunks.py,
gateway/api/anthropic_messages/events.py, gateway/api/responses/events.py,
gateway/api/speech/stream.py, gateway/api/transcriptions/stream.py) and the body builders they
call. Policy: `required` lists the keys a body always
has; objects leave `additionalProperties` open (fields may be added); null is allowed exactly
where the code can send null. Which operation answers which of them, by status:
responses.py.
"""

from __future__ import annotations

from gateway.api.admin import schemas as admin
from gateway.api.anthropic_messages import schemas as anthropic
from gateway.api.chat_completions import schemas as chat
from gateway.api.embeddings import schemas as embeddings
from gateway.api.images import schemas as images
from gateway.api.responses import schemas as responses_api
from gateway.api.responses.schemas import RESPONSE_EVENTS
from gateway.api.speech import schemas as speech
from gateway.api.tokenize import schemas as tokenize
from gateway.api.transcriptions import schemas as transcriptions
from gateway.api.videos import schemas as videos
from gateway.schema import error_bodies
from gateway.schema.builders import Schema

__all__ = ["COMPONENTS", "RESPONSE_EVENTS", "Schema", "ref"]

COMPONENTS: dict[str, Schema] = {
    **error_bodies.SCHEMAS,
    **admin.SCHEMAS,
    **chat.SCHEMAS,
    **anthropic.SCHEMAS,
    **responses_api.SCHEMAS,
    **speech.SCHEMAS,
    **transcriptions.SCHEMAS,
    **embeddings.SCHEMAS,
    **images.SCHEMAS,
    **videos.SCHEMAS,
    **tokenize.SCHEMAS,
    **admin.ADMIN,
}


def ref(name: str) -> Schema:
    """A reference to `COMPONENTS[name]`."""
    if name not in COMPONENTS:
        raise KeyError(f"no component schema {name!r}")
    return {"$ref": f"#/components/schemas/{name}"}
