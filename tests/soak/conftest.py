"""The soak test runs on the integration suite's fixtures and helpers.

tests/integration/ goes on sys.path (its daemon.py, helpers.py and the
techniques of its hostile tests are imported from there), and its
conftest.py is loaded under another name and re-exported here: the same
paths (BUILD, AGENTBOX, ...), the same root-and-binary check, and the same
session-end check that no sandbox cgroup, mount or process is left.
"""
import importlib.util
import os
import sys

_INTEGRATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "integration")
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)

_spec = importlib.util.spec_from_file_location("integration_conftest",
                                               os.path.join(_INTEGRATION, "conftest.py"))
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)
# daemon.py does `from conftest import BUILD`: this module answers for it
globals().update({k: v for k, v in vars(_integration).items() if not k.startswith("__")})
