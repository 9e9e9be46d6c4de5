"""The server's own routes and the admin API: the base URL `/` and `/v1` (root.py), `/health`,
`/metrics`, `/v1/models` and `/v1/models/{id}` (models.py), and `/v1/admin/models/load`,
`unload`, `pin` and `/v1/admin/stats` (admin.py, with their field tables); routes.py, and the
response schemas (schemas.py)."""
