"""A pytest plugin for tests/vm: deselect exactly the node ids listed, one
a line, in the file $AGENTBOX_VM_DESELECT (pytest's own --deselect matches
prefixes, so it would also drop test_x_and_more along with test_x)."""
import os


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("AGENTBOX_VM_DESELECT")
    if not path or not os.path.exists(path):
        return
    with open(path) as f:
        wanted = {line.strip() for line in f if line.strip()}
    keep = [item for item in items if item.nodeid not in wanted]
    drop = [item for item in items if item.nodeid in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
