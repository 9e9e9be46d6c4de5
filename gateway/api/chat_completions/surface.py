"""The field table of `/v1/completions`: every field OpenAI defines (and vLLM's sampling
extensions), each honoured, accepted with no local meaning, or refused with a 400 naming it.
The parser checks bodies against it (requests.py) and /openapi.json shows it. The table of
`/v1/chat/completions` is `CHAT` in gateway/generation/chat_body.py (the Realtime API reads its
responses with it too).
"""

from __future__ import annotations

from gateway.generation.chat_body import MAX_N
from gateway.generation.vllm_structured import FIELDS as VLLM_STRUCTURED
from gateway.schema import field as s
from gateway.schema.openai_chat import MAX_TOP_LOGPROBS, SAMPLING, STREAM_OPTIONS
from gateway.schema.request import RequestSchema

COMPLETION = RequestSchema(
    {
        "model": s.string("The served model's id or an alias.", minLength=1),
        "prompt": s.structure(
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
                ]
            },
            "A string, token ids, or a one-element array of either.",
        ),
        "stream": s.boolean("Server-sent events, ending with `data: [DONE]`."),
        "stream_options": STREAM_OPTIONS,
        "max_tokens": s.integer("Tokens to generate at most (default: --max-tokens).", 1),
        "n": s.integer("Choices to generate.", 1, MAX_N),
        "best_of": s.integer("Only equal to n (no server-side ranking).", 1),
        "echo": s.boolean("Prepend the prompt to the text (not with logprobs)."),
        "logprobs": s.integer("Alternatives per token.", 0, MAX_TOP_LOGPROBS),
        "suffix": s.string("Fill-in-the-middle: only empty (no served model has it)."),
        **SAMPLING,
        **VLLM_STRUCTURED,
        "user": s.accepted(s.string()),
    },
    required=("model", "prompt"),
)
