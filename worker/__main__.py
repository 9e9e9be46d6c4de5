"""`python -m worker`: the MLX worker process (see worker/process.py)."""

from worker.process import main

if __name__ == "__main__":
    main()
