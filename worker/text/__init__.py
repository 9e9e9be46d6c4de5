"""Text generation on mlx-lm: the text engines (continuous batching, batch-1), one request's
limits and stops, prompts, sampling, and the per-request features (`parsers/`, `constraints/`).
"""
