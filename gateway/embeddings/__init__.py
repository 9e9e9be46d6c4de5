"""`/v1/embeddings`: the request parser (request.py) and the response body (response.py)."""
