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
# mlx-cuda-13 finds its CUDA libraries through $ORIGIN/../../nvidia/... (where pip puts the
# nvidia-* wheels beside it); the image has them in its own environment, so /tmp/site/nvidia
# is made to point there.
link_nvidia() {
  local nv
  nv=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])")
  ln -sfn "$nv" /tmp/site/nvidia
  export LD_LIBRARY_PATH="$(ls -d "$nv"/*/lib | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
case "${1:-run}" in
  stage)  # also checks that the gateway imports with the image's packages and these wheels
    mkdir -p "$STAGE" && cp .gpu/part1/* "$STAGE"/ && ls -la "$STAGE"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $(ls "$STAGE"/*.whl | grep -v mlx)
    PYTHONPATH=/tmp/site:$PWD python3 -c "import gateway.cli.main, gateway.app, transformers, \
      jinja2; print('gateway imports; transformers', transformers.__version__)"
    exit 0 ;;
  run) ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
cp .gpu/part2/* "$STAGE"/
big=$(ls "$STAGE"/mlx_cuda_13-*.whl.part00 | sed 's/\.part00$//')
cat "$big".part00 "$big".part01 > "$big" && rm "$big".part0*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$STAGE"/*.whl
link_nvidia
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export VOMLX_CACHE_DIR=/tmp/vomlx-cache
OUT=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())" | tee -a "$OUT/gpu.txt"
# The stages, most telling first, each cut at its own limit and at a deadline for the whole
# run (one device call may run 600 s): a stage with under 40 s left is skipped.
DEADLINE=${GPU_BENCH_DEADLINE:-540}
step() { echo; echo "== $* ($(date +%T), ${SECONDS}s)"; }
limit() {  # the seconds stage may take: its own limit or what is left before the deadline
  local left=$((DEADLINE - SECONDS))
  ((left < 40)) && { echo "(skipped: ${left}s left)"; return 1; }
  echo $((left < $1 ? left : $1))
}
stage_run() {  # stage_run NAME LIMIT COMMAND...
  local name=$1 own=$2 t; shift 2
  step "$name"
  t=$(limit "$own") || { echo "$t"; return 0; }
  timeout "$t" "$@" || echo "($name: cut off or failed, rc $?)"
}
declare -A CKPT
compare() {  # compare SIZE STREAMS ROUNDS LIMIT
  stage_run "$1: single stream and $2 streams" "$4" python3 -m scripts.bench_compare \
    --model "${CKPT[$1]}" --blas bundled --sides ours,mlx_lm.server,direct \
    --scenarios "$([ "$2" = 8 ] && echo single,batch || echo batch)" --batch "$2" \
    --rounds "$3" --max-tokens 512 --json "$OUT/compare-$1-$2.json"
  if [ "$2" = 8 ] && [ -f "$OUT/compare-$1-8.json" ]; then
    python3 -m scripts.bandwidth_bound "${CKPT[$1]}" "$OUT/compare-$1-8.json" \
      --bandwidth-gbs 4800 || echo "(bandwidth bound $1: failed)"
  fi
}
step "checkpoint 1b"; CKPT[1b]=$(python3 -m worker.tiny_models.real_size 1b) || echo "(failed)"
compare 1b 8 2 150
step "checkpoint 8b"; CKPT[8b]=$(python3 -m worker.tiny_models.real_size 8b) || echo "(failed)"
compare 8b 8 2 150
stage_run "agent session (1b, 25K-token prompt, 10 turns)" 130 python3 -m \
  scripts.bench_agent_session --model "${CKPT[1b]}" --blas bundled \
  --sides ours,mlx_lm.server,direct --variants append --json "$OUT/agent-1b.json"
compare 1b 32 1 90
compare 8b 32 1 90
step "done"
