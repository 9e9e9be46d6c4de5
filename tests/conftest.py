"""Suite-wide collection fixes."""

from __future__ import annotations

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
