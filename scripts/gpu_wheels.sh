#!/usr/bin/env bash
# The wheels scripts/gpu_bench.sh installs on the GPU machine, which reaches no package index:
# fetched here (where PyPI is reachable) for its Python 3.12 on x86-64 Linux, into .gpu/
# (git-ignored), in two parts of under 60 MiB each, since one call may carry 64 MiB at most.
#
#   bash scripts/gpu_wheels.sh        # then see scripts/gpu_bench.sh for the two calls
#
# What its image already has (device KINDS.md: numpy, transformers, tokenizers, safetensors,
# jinja2, sentencepiece, protobuf, pyyaml, httpx, click, prometheus-client, msgpack, uvloop,
# pillow, huggingface-hub, anyio, h11) is not fetched. mlx-cuda-13's own CUDA libraries
# (cuBLAS 13, cuDNN 9, NCCL, cuFFT, NVRTC, cuSOLVER) are the image's too.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/all .gpu/part1 .gpu/part2
# The versions this tree is tested with (the CPU venv's), mlx's CUDA build of the same version.
version() { .venv/bin/python -c "import importlib.metadata as m; print(m.version('$1'))"; }
WHEELS=("mlx-cuda-13==$(version mlx)")
for name in mlx mlx-lm starlette uvicorn httptools websockets pyzmq msgspec llguidance; do
  WHEELS+=("$name==$(version "$name")")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 \
  --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .gpu/all "${WHEELS[@]}"
# The big one is cut in two (joined there), everything else rides with its first half.
big=$(ls .gpu/all/mlx_cuda_13-*.whl)
split -n 2 -d "$big" ".gpu/part1/$(basename "$big").part"
mv ".gpu/part1/$(basename "$big").part01" .gpu/part2/
rm "$big" && mv .gpu/all/*.whl .gpu/part1/ && rmdir .gpu/all
du -sh .gpu/part1 .gpu/part2
