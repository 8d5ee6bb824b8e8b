"""Shared fixtures of the Python suite: `device` runs a test on "cpu" and on the host-simulated
"sim:0" (two sim devices are configured before tessera is imported), `sim_device` on sim:0 only."""
import os

os.environ.setdefault("TS_SIM_DEVICES", "2")

import pytest  # noqa: E402

import tessera  # noqa: E402

DEVICES = ["cpu", "sim:0"]


@pytest.fixture(params=DEVICES)
def device(request):
    """Each test taking `device` runs once per device: "cpu" and "sim:0"."""
    return request.param


@pytest.fixture
def sim_device():
    return "sim:0"


def assert_close(actual, expected, rel=1e-6, abs_=1e-6):
    """actual (nested lists / numbers) against expected within rel/abs, element by element."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, rel, abs_)
    else:
        assert actual == pytest.approx(expected, rel=rel, abs=abs_), (actual, expected)


@pytest.fixture
def close():
    return assert_close
