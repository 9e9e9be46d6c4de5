"""Decode speed against the memory-bandwidth bound: what a decoded token must read (every
weight once, and the KV cache of the context) over the GPU's bandwidth, and how close each
side of a `scripts/bench_compare.py --json` run came to it.

    python -m scripts.bandwidth_bound CKPT COMPARE.json [--bandwidth-gbs 4800] [--context 640]

bytes per token = the checkpoint's weight bytes (its safetensors files) + the KV bytes of
`--context` tokens (2 x layers x kv_heads x head_dim x 2 bytes each, bfloat16): the single
stream of bench_compare decodes 128 tokens after a ~512-token prompt, so ~640 by its end.
Bound = bandwidth / bytes per token; each side's median single-stream decode tok/s is
reported as a fraction of it. The H200's HBM3e: 4.8 TB/s (NVIDIA's figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def weight_bytes(checkpoint: Path) -> int:
    return sum(f.stat().st_size for f in checkpoint.glob("*.safetensors"))


def kv_bytes_per_token(config: dict) -> int:
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads") or heads
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("compare_json", type=Path)
    parser.add_argument("--bandwidth-gbs", type=float, default=4800.0)
    parser.add_argument("--context", type=int, default=640)
    args = parser.parse_args()
    config = json.loads((args.checkpoint / "config.json").read_text())
    per_token = weight_bytes(args.checkpoint) + args.context * kv_bytes_per_token(config)
    bound = args.bandwidth_gbs * 1e9 / per_token
    data = json.loads(args.compare_json.read_text())["data"]["single"]
    print(f"{args.checkpoint.name}: {per_token / 1e9:.2f} GB a token, bound at "
          f"{args.bandwidth_gbs:.0f} GB/s: {bound:.1f} tok/s")  # fmt: skip
    for side, rows in data.items():
        speeds = [r["decode_tok_s"] for r in rows if r.get("decode_tok_s")]
        if speeds:
            tok_s = statistics.median(speeds)
            print(f"  {side:14s} {tok_s:8.1f} tok/s = {tok_s / bound:.2f} of the bound")


if __name__ == "__main__":
    main()
