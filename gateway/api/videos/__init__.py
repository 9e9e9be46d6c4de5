"""OpenAI's video API: `/v1/videos` jobs, served by the worker's video engine."""
