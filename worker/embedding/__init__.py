"""Embeddings on the MLX thread: encoders on mlx-embeddings, decoders (last-token pooling) on
mlx-lm, concurrent requests batched into shared forward passes (engine.py)."""
