"""The Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`): routes.py, the
field tables (surface.py), request parsing (requests.py, content.py, context_edits.py,
attribution.py), Message objects (message.py), stream events (events.py) and the response
schemas (schemas.py)."""
