"""The prefix cache: KV caches of earlier prompts in memory (LRU under a byte budget), an SSD
tier written off the MLX thread, and warm prompts prefilled at start. No engine coupling: the
text engines use it through `worker.text.prefix_reuse`.
"""
