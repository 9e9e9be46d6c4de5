"""The OpenAI Responses API (`/v1/responses`, `GET` / `DELETE /v1/responses/{id}`): routes.py,
the field table (surface.py), request parsing (requests.py, inputs.py), output objects
(objects.py), stream events (events.py), the store (store.py) and the response schemas
(schemas.py)."""
