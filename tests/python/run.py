"""run.py — the ctest entry of the Python suite: imports the package built in BUILD/python and runs
pytest over tests/python. Exit 77 (ctest's skip) when this interpreter lacks pytest."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])
    os.environ["PYTHONPATH"] = sys.argv[1] + os.pathsep + os.environ.get("PYTHONPATH", "")
try:
    import pytest
except ImportError:
    print("skipped: %s has no pytest (apt-get install python3-pytest)" % sys.executable)
    sys.exit(77)
sys.exit(pytest.main([here, "-q", "-p", "no:cacheprovider"] + sys.argv[2:]))
