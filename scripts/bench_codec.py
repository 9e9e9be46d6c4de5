"""Encode + decode time of the protocol's hot message: a Step carrying 8 text deltas.

    python -m scripts.bench_codec [--rounds 7] [--n 20000]

One Step per worker iteration carries every active request's deltas; at 8 streams that is 8
deltas of one token each. The script only uses `Step`, `Delta`, `encode` and `decode`, so it
runs unchanged on every protocol version (run it at two commits to compare codecs). Prints
microseconds per round trip: the minimum and the median of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from protocol import decode, encode
from protocol.messages import Delta, Step


def sample_step() -> Step:
    return Step(
        [Delta(f"req-{i:02d}-{'x' * 24}", text=" token", token_ids=[1234]) for i in range(8)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=20000, help="round trips per round")
    args = parser.parse_args()
    step = sample_step()
    frame = encode(step)
    assert decode(frame) == step
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.n):
            decode(encode(step))
        times.append((time.perf_counter() - start) / args.n * 1e6)
    print(
        f"Step of 8 deltas, {len(frame)} bytes: encode + decode "
        f"min {min(times):.2f} us, median {statistics.median(times):.2f} us"
    )


if __name__ == "__main__":
    main()
