"""Work without a server, run by the gateway's CLI as a subprocess: `python -m worker.oneshot.X`.

`transcribe.py` (speech in) and `synthesize.py` (speech out) drive the same engines the
server's worker runs, on one input, and exit.
"""
