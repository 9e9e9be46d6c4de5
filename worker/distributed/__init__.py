"""One model sharded across the ranks of an MLX distributed group (docs/distributed.md)."""
