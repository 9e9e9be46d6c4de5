"""Embeddings: inputs embedded per second through the server vs direct mlx-embeddings.

    python -m scripts.bench_embeddings [--model ENCODER_DIR] [--rounds 5] [--batches 1,32,256]
        [--tokens 64] [--inputs 256] [--url http://127.0.0.1:8000 --served-name NAME]

Without --url the script starts `vllm-omni-mlx serve ENCODER_DIR --blas bundled` itself (the
worker then has the BLAS this process has) and stops it at the end; --model defaults to the
tiny random-weight BERT (`worker/tiny_models`, `bert` / `tiny`), which shows the plumbing,
not a model's speed: measure on a real encoder (all-MiniLM-L6-v2: tests/support/minilm.py).

For each batch size B the inputs are texts of about --tokens tokens each (distinct texts, cut
to length with the model's tokenizer); one measurement embeds --inputs of them (at least B):
the server side sends them as sequential `/v1/embeddings` requests of B inputs on one kept-alive
connection (base64 bodies, as the openai SDK asks), the direct side calls
`mlx_embeddings.utils.generate(model, tokenizer, texts)` on the same B texts and evaluates the
vectors, in this process. Rounds interleave the sides (which goes first alternates) and the
batch sizes, so both see the same machine state; the table shows the median inputs/s of each
side and their ratio (server / direct: the target is >= 0.9 at B = 32). The server splits a
request into passes of at most --embedding-batch-tokens padded tokens (8192 by default: 256
inputs of 64 tokens are two passes), so chat can interleave; pass --server-arg to change it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from scripts.bench_sides import free_port, ours, side_env
from worker.tiny_models import ensure_checkpoint

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog while the river runs past the old mill. "
    "Servers batch requests so that many small inputs share one forward pass of the model. "
    "Retrieval systems embed documents once and compare them with every query they get. "
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="an encoder checkpoint [default: the tiny BERT]")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--blas",
        choices=["bundled", "openblas"],
        default="bundled",
        help="the server's BLAS; for openblas start this process with LD_PRELOAD of the same "
        "library, so the direct side matches",
    )
    p.add_argument("--batches", default="1,32,256", help="inputs per request, comma-separated")
    p.add_argument("--tokens", type=int, default=64, help="tokens of each input (about)")
    p.add_argument("--inputs", type=int, default=256, help="inputs per measurement (>= batch)")
    p.add_argument("--url", help="a running server to measure instead of starting one")
    p.add_argument("--served-name", help="`model` of the requests [default: the served id]")
    p.add_argument("--api-key", default=None)
    p.add_argument("--server-arg", action="append", default=[], help="extra `serve` flags")
    return p.parse_args()


def texts_of(tokenizer, count: int, tokens: int) -> list[str]:
    """`count` distinct texts of about `tokens` tokens each (special tokens included)."""
    ids = tokenizer(PARAGRAPH * (1 + tokens // 8), add_special_tokens=False)["input_ids"]
    body = max(1, tokens - 2)  # [CLS] ... [SEP]
    out = []
    for i in range(count):
        start = (i * 7) % max(1, len(ids) - body)
        out.append(f"{i} " + tokenizer.decode(ids[start : start + body - 1]))
    return out


def server_round(client: httpx.Client, name: str, texts: list[str], batch: int) -> float:
    """Inputs per second of sequential requests of `batch` inputs covering `texts`."""
    started = time.perf_counter()
    for at in range(0, len(texts), batch):
        response = client.post(
            "/v1/embeddings",
            json={"model": name, "input": texts[at : at + batch], "encoding_format": "base64"},
        )
        response.raise_for_status()
    return len(texts) / (time.perf_counter() - started)


def direct_round(model, tokenizer, texts: list[str], batch: int) -> float:
    import mlx.core as mx
    from mlx_embeddings.utils import generate

    started = time.perf_counter()
    for at in range(0, len(texts), batch):
        mx.eval(generate(model, tokenizer, texts[at : at + batch]).text_embeds)
    return len(texts) / (time.perf_counter() - started)


def main() -> int:
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    path = args.model or str(ensure_checkpoint("bert", "tiny"))
    from mlx_embeddings.utils import load

    model, wrapper = load(path)
    tokenizer = getattr(wrapper, "_tokenizer", wrapper)
    server = None
    if args.url:
        url = args.url.rstrip("/")
    else:
        log_dir = Path(tempfile.mkdtemp(prefix="bench-embeddings-"))
        port = free_port()
        server = ours(path, port, args.blas, log_dir, 8)
        server.command += args.server_arg
        server.start(side_env(args.blas), port)
        server.wait_ready()
        url = server.url
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    try:
        client = httpx.Client(base_url=url, headers=headers, timeout=3600)
        name = args.served_name or client.get("/v1/models").json()["data"][0]["id"]
        inputs = {b: texts_of(tokenizer, max(b, args.inputs), args.tokens) for b in batches}
        lengths = [len(r) for r in tokenizer(inputs[batches[0]][:32])["input_ids"]]
        print(f"model {path}: inputs of {min(lengths)}-{max(lengths)} tokens", file=sys.stderr)
        for b in batches:  # warm-up: compilation and first-call costs count for neither side
            server_round(client, name, inputs[b][:b], b)
            direct_round(model, tokenizer, inputs[b][:b], b)
        rates: dict[int, dict[str, list[float]]] = {
            b: {"server": [], "direct": []} for b in batches
        }
        for round_ in range(args.rounds):
            for b in batches:
                sides = [
                    ("server", lambda b=b: server_round(client, name, inputs[b], b)),
                    ("direct", lambda b=b: direct_round(model, tokenizer, inputs[b], b)),
                ]
                for side, measure in sides if round_ % 2 == 0 else sides[::-1]:
                    rates[b][side].append(measure())
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    print("| batch | inputs / measurement | direct inputs/s | server inputs/s | server / direct |")
    print("| --- | --- | --- | --- | --- |")
    for b in batches:
        direct = statistics.median(rates[b]["direct"])
        served = statistics.median(rates[b]["server"])
        n = len(inputs[b])
        print(f"| {b} | {n} | {direct:.1f} | {served:.1f} | {served / direct:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
