"""run.py — the ctest entry of the Python suite: imports the package built in BUILD/python and runs
pytest over tests/python. Exit 77 (ctest's skip) when this interpreter lacks pytest."""
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
        os.environ["PYTHONPATH"] = sys.argv[1] + os.pathsep + os.environ.get("PYTHONPATH", "")
    try:
        import pytest
    except ImportError:
        print("skipped: %s has no pytest (apt-get install python3-pytest)" % sys.executable)
        return 77
    return pytest.main([here, "-q", "-p", "no:cacheprovider"] + sys.argv[2:])


# guarded: the spawn start method (tests/python/test_multiprocessing.py) imports this main module
# again in each child, which must not run the suite once more
if __name__ == "__main__":
    sys.exit(main())
