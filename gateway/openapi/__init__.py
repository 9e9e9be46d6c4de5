"""The OpenAPI 3.1 document (`GET /openapi.json`) and the docs page that renders it (`GET /docs`)."""
