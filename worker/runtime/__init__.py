"""The worker process itself: entry point, IO threads, the MLX thread's scheduler, liveness.

Engine-agnostic: it loads the engines (`loading.py`), hands them Submits on the one MLX thread
(`scheduler.py`) through the interface every engine implements (`engine.py`), and moves bytes
between the sockets and that thread (`io_threads.py`, `handoff.py`, `channels.py`).
"""
