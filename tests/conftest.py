"""Suite-wide settings and collection fixes."""

from __future__ import annotations

import os

# Every server the suite starts gets OpenBLAS's short spin (2^4 cycles before a helper thread
# sleeps). At the default (2^28) a tiny checkpoint's ~1.5 ms steps keep the helper thread
# spinning in sched_yield for a whole generation; on 2 cores the gateway and the test client
# then waited in the run queue for seconds (/proc/PID/schedstat: 4.15 s waiting, 0.03 s running
# in one request), so a test that polls the server to hang up mid-request polled after it ended.
# The product keeps OpenBLAS's default, which decodes real checkpoints faster
# (docs/benchmarks.md, "OpenBLAS threads"); outputs are the same either way.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

try:
    from _pytest.nodeid import NodeId  # pytest 9: an item's id is structured, set at creation
except ImportError:  # pytest 8 derives the id from the name, which already has the operation
    NodeId = None


def pytest_collection_modifyitems(items):
    """schemathesis (4.32, on pytest 9) names each operation's item `test[POST /path]` but gives
    them all the function's node id. pytest-xdist addresses items by node id (`make test` runs
    two workers), so with equal ids all but one operation would go unrun: each item gets the
    node id its name implies."""
    for item in items:
        if NodeId is None or getattr(item, "operation_label", None) is None:
            continue
        wanted = f"{item.parent.nodeid}::{item.name}"
        if item.nodeid != wanted:
            item._id = NodeId.parse(wanted)
