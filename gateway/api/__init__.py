"""The HTTP APIs, one package per API: each holds its routes (`routes.py`: `ROUTES`), its
request-field table, its parsing and rendering, and its response schemas (`schemas.py`, for
/openapi.json). A package here imports what lies below the APIs (`generation`, `schema`,
`audio`, `media`, `engine`, `http`, ...), never another API's package, and nothing below
imports one but gateway/app.py and the OpenAPI document's assembly
(tests/unit/test_gateway_layers.py); gateway/app.py joins their `ROUTES`.
"""
