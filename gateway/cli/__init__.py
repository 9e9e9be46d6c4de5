"""The `vllm-omni-mlx` command line: `serve`, model swaps and stats, `bench`, and speech in and
out without a server.
"""
