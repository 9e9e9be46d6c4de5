"""What both processes know about starting a worker; no MLX, no HTTP in it.

The gateway checks these before it spawns a worker and builds the worker's environment from
them; the worker uses them once started. Besides `protocol/`, this is the only code both
processes import.
"""
