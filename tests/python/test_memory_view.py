"""`tessera memory-view`: the HTML page of a memory snapshot, read back with html.parser (no
browser; test_profile_browser.py opens it in Chromium): the totals table per device against sums
computed here from the snapshot, one live-blocks row per live block (largest first, with its
stack), the embedded JSON equal to the snapshot; PyTorch's layout (no device_name) accepted; bad
input refused with a clear message."""
import json
from html.parser import HTMLParser

import pytest

from profile_pages import find_cli, run_cli, simple_cnn_step

CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="the tessera command is not built beside "
                                "the package (set TESSERA_CLI)")


class Page(HTMLParser):
    """tables: id -> list of (tr attributes, [cell texts]); scripts: id -> text."""

    def __init__(self):
        super().__init__()
        self.tables, self.scripts = {}, {}
        self._table = self._row = self._cell = self._script = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(a.get("id"), [])
        elif tag == "tr" and self._table is not None:
            self._row = (a, [])
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "script":
            self._script = a.get("id")
            self.scripts[self._script] = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row[1].append("".join(self._cell))
            self._cell = None
        elif tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._script is not None:
            self.scripts[self._script] += data


def view(tmp_path, snap):
    src, out = tmp_path / "in.json", tmp_path / "page.html"
    src.write_text(json.dumps(snap))
    r = run_cli(CLI, "memory-view", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = Page()
    page.feed(out.read_text())
    return page


def device_of(seg):
    return seg.get("device_name") or f"cuda:{seg['device']}"


def test_real_snapshot_page(tmp_path):
    _, _, snap = simple_cnn_step(tmp_path, "sim:0", batch=2)
    page = view(tmp_path, snap)
    # the snapshot rides along unchanged
    assert json.loads(page.scripts["snapshot"]) == snap
    # totals: one row per device, the sums over its segments and blocks
    want = {}
    for s in snap["segments"]:
        t = want.setdefault(device_of(s), {"reserved": 0, "allocated": 0, "free": 0,
                                           "largest-free": 0})
        t["reserved"] += s["total_size"]
        for b in s["blocks"]:
            if b["state"] == "inactive":
                t["free"] += b["size"]
                t["largest-free"] = max(t["largest-free"], b["size"])
            else:
                t["allocated"] += b["size"]
    rows = [a for a, _ in page.tables["totals"][1:]]
    got = {a["data-device"]: {k: int(a["data-" + k]) for k in want[a["data-device"]]}
           for a in rows}
    assert got == want
    assert "sim:0" in got and got["sim:0"]["allocated"] > 0
    # the device's allocated bytes agree with the allocator's own count
    sim = [d for d in snap["devices"] if d["device"] == "sim:0"][0]
    assert got["sim:0"]["allocated"] == sim["allocated"]
    # live blocks: one row each, largest first, each with its stack (history was on)
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] != "inactive"]
    brows = [cells for _, cells in page.tables["blocks"][1:]]
    assert len(brows) == len(live) > 0
    sizes = [int(c[3]) for c in brows]
    assert sizes == sorted((b["size"] for b in live), reverse=True)
    with_frames = sum(1 for s in snap["segments"] if s["device_name"] == "sim:0"
                      for b in s["blocks"] if b["state"] != "inactive" and b.get("frames"))
    assert with_frames > 0
    assert sum(1 for c in brows if c[0] == "sim:0" and not c[7].startswith("(no stack")) == \
        with_frames


def test_pytorch_layout_and_fragmentation(tmp_path):
    # PyTorch's _snapshot(): device as an index, no device_name; a segment with two free holes
    seg = {"device": 0, "address": 4096, "total_size": 4096, "stream": 7,
           "segment_type": "small",
           "blocks": [{"address": 4096, "size": 1024, "state": "active_allocated",
                       "frames": [{"name": "f<x>", "filename": "a.py", "line": 3}]},
                      {"address": 5120, "size": 512, "state": "inactive"},
                      {"address": 5632, "size": 1536, "state": "inactive"},
                      {"address": 7168, "size": 1024, "state": "active_pending_free"}]}
    page = view(tmp_path, {"segments": [seg], "device_traces": [[]]})
    (attrs, cells), = page.tables["totals"][1:]
    assert attrs["data-device"] == "cuda:0"
    assert int(attrs["data-free"]) == 2048 and int(attrs["data-largest-free"]) == 1536
    assert cells[8] == "25.0%"  # 1 - 1536 / 2048
    brows = [c for _, c in page.tables["blocks"][1:]]
    assert [c[4] for c in brows] == ["active_allocated", "active_pending_free"]
    assert brows[0][5] == "7" and brows[0][7].strip() == "f<x> a.py:3"


def test_python_frames_listed_first(tmp_path):
    # a Tessera snapshot's block: ten C frames (no file), then the Python frames of the call; the
    # page's stack starts with the Python lines (the user's), then as many C frames as fit
    c_frames = [{"name": f"libtessera.so(+0x{i:x})", "filename": "", "line": 0} for i in range(10)]
    py = [{"name": "step", "filename": "train.py", "line": 12},
          {"name": "<module>", "filename": "train.py", "line": 40}]
    seg = {"device": 0, "device_name": "sim:0", "address": 0, "total_size": 512,
           "blocks": [{"address": 0, "size": 512, "state": "active_allocated",
                       "frames": c_frames + py}]}
    page = view(tmp_path, {"segments": [seg]})
    (cells,) = [c for _, c in page.tables["blocks"][1:]]
    lines = cells[7].strip().split("\n")
    assert lines[:2] == ["step train.py:12", "<module> train.py:40"]
    assert lines[2:8] == [f["name"] for f in c_frames[:6]]
    assert lines[8] == "... 4 more"


def test_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": []}')
    r = run_cli(CLI, "memory-view", str(bad), "-o", str(tmp_path / "x.html"))
    assert r.returncode == 1
    assert "memory-view" in r.stderr and "not a memory snapshot" in r.stderr
    r = run_cli(CLI, "memory-view", str(bad))
    assert r.returncode == 2 and "-o FILE.html" in r.stderr
