"""`python -m worker`: the MLX worker process (see worker/runtime/process.py)."""

from worker.runtime.process import main

if __name__ == "__main__":
    main()
