"""How a distributed model may be split (`serve --parallel`, the worker's `--parallel`)."""

PARALLEL_MODES = ("auto", "tensor", "pipeline")
