"""Embeddings and reranking on the MLX thread: encoders on mlx-embeddings, decoders (last-token
pooling) on mlx-lm, cross-encoders and LLM rerankers (rerankers.py), concurrent requests batched
into shared forward passes (engine.py)."""
