#!/usr/bin/env bash
# The GPU comparison of issue 18 (docs/benchmarks.md, "On a GPU"): ours vs direct mlx-lm vs
# mlx_lm.server on MLX's CUDA build: a single stream, 8 and 32 streams, and an agent session,
# at real model sizes (worker/tiny_models/real_size.py: random bfloat16 weights of Llama
# 3.2 1B and Llama 3.1 8B, made on the GPU), with decode tok/s against the memory-bandwidth
# bound (scripts/bandwidth_bound.py). Budget: under 10 minutes on one H200.
#
# The GPU machine reaches no package index, so the wheels travel with the tree, in two calls
# of the device tool made back to back (the machine stays warm between them):
#   here:   bash scripts/gpu_wheels.sh
#   call 1: command "bash scripts/gpu_bench.sh stage", carry [".gpu/part1"]   (seconds)
#   call 2: command "bash scripts/gpu_bench.sh run",   carry [".gpu/part2"]   (~8 minutes)
# `run` prints every table and leaves the JSON in $OUT (the tool brings it back).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=/tmp/gpu-wheels
case "${1:-run}" in
  stage)
    mkdir -p "$STAGE" && cp .gpu/part1/* "$STAGE"/ && ls -la "$STAGE" && exit 0 ;;
  run) ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
cp .gpu/part2/* "$STAGE"/
big=$(ls "$STAGE"/mlx_cuda_13-*.whl.part00 | sed 's/\.part00$//')
cat "$big".part00 "$big".part01 > "$big" && rm "$big".part0*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$STAGE"/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export VOMLX_CACHE_DIR=/tmp/vomlx-cache
OUT=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())" | tee -a "$OUT/gpu.txt"
step() { echo; echo "== $* ($(date +%T))"; }
for size in 1b 8b; do
  step "checkpoint $size"
  ckpt=$(python3 -m worker.tiny_models.real_size "$size")
  step "$size: single stream and 8 streams"
  timeout 150 python3 -m scripts.bench_compare --model "$ckpt" --blas bundled \
    --sides ours,mlx_lm.server,direct --scenarios single,batch --batch 8 --rounds 2 \
    --json "$OUT/compare-$size-8.json" | tail -n 20 || echo "($size, 8 streams: cut off)"
  step "$size: 32 streams"
  timeout 120 python3 -m scripts.bench_compare --model "$ckpt" --blas bundled \
    --sides ours,mlx_lm.server,direct --scenarios batch --batch 32 --rounds 1 \
    --json "$OUT/compare-$size-32.json" | tail -n 12 || echo "($size, 32 streams: cut off)"
  step "$size: bandwidth bound"
  [ -f "$OUT/compare-$size-8.json" ] && python3 -m scripts.bandwidth_bound "$ckpt" \
    "$OUT/compare-$size-8.json" --bandwidth-gbs 4800
done
step "agent session (1b, 25K-token prompt, 10 turns)"
timeout 150 python3 -m scripts.bench_agent_session --model "$(python3 -m worker.tiny_models.real_size 1b)" \
  --blas bundled --sides ours,mlx_lm.server,direct --variants append \
  --json "$OUT/agent-1b.json" || echo "(agent session: cut off)"
