"""Embeddings, reranking and scoring: `/v1/embeddings` (request.py, response.py), `/v1/rerank`
and `/v1/score` (scoring.py); routes.py, embeddings.py, rerank.py; schemas.py (responses)."""
