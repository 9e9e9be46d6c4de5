"""Chat with images (and audio) on mlx-vlm: the vision engine, its prompts, image features
reused by content hash, and conversations about images that keep their KV cache.
"""
