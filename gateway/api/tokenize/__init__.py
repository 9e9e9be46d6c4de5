"""vLLM's tokenizer endpoints (`/tokenize`, `/detokenize`): routes.py, the field tables and
parsing (requests.py) and the response schemas (schemas.py)."""
