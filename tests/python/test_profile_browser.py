"""The profiler's pages in a real browser: headless Chromium (Debian's `chromium`) opens the
`tessera profile-view` timeline of a profiled SimpleCNN step on sim:0 and the `tessera memory-view`
page of its memory snapshot; the rendered DOM holds the expected tracks and rows, the page's own
status line says it rendered, the console shows no error, and a screenshot of each page is saved
into the build directory (<build>/profile_browser/). Skips without chromium (it is not a build or
CI dependency: apt-get install chromium to run it)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from profile_pages import find_cli, run_cli, simple_cnn_step

CLI = find_cli()
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="chromium is not installed (apt-get install "
                       "chromium to open the profiler's pages in a real browser)"),
    pytest.mark.skipif(CLI is None, reason="the tessera command is not built beside the package "
                       "(set TESSERA_CLI)"),
]


def open_pages(pages):
    """Starts one headless Chromium per (html, png) at once; returns [(dom, console lines)]."""
    procs = []
    for html, png in pages:
        procs.append(subprocess.Popen(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--enable-logging=stderr", "--v=0", "--window-size=1400,1000",
             f"--screenshot={png}", "--dump-dom", "file://" + os.path.abspath(html)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        dom, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-2000:]
        out.append((dom, [ln for ln in err.splitlines() if ":CONSOLE" in ln]))
    return out


def status(dom):
    m = re.search(r'<p id="status">([^<]*)</p>', dom)
    assert m, "the page has no status line"
    return m.group(1)


def test_pages_render_in_chromium(tmp_path):
    trace, snap_path, snap = simple_cnn_step(tmp_path, "sim:0", batch=4)
    shots = os.path.join(os.path.dirname(CLI), "profile_browser")
    os.makedirs(shots, exist_ok=True)
    tl_html, mem_html = str(tmp_path / "trace.html"), str(tmp_path / "memory.html")
    assert run_cli(CLI, "profile-view", trace, "-o", tl_html).returncode == 0
    assert run_cli(CLI, "memory-view", snap_path, "-o", mem_html).returncode == 0
    tl_png, mem_png = os.path.join(shots, "trace.png"), os.path.join(shots, "memory.png")
    for png in (tl_png, mem_png):
        if os.path.exists(png):
            os.remove(png)
    (tl_dom, tl_console), (mem_dom, mem_console) = open_pages([(tl_html, tl_png),
                                                              (mem_html, mem_png)])
    assert tl_console == [] and mem_console == [], tl_console + mem_console

    # the timeline: every track of the trace labelled, its events drawn, the tables filled
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    tracks = {(e["pid"], e["tid"]) for e in xs}
    assert status(tl_dom) == f"rendered {len(xs)} events, {len(tracks)} tracks"
    labels = re.findall(r'<div class="lbl"[^>]*>([^<]*)</div>', tl_dom)
    assert len(labels) == len(tracks)
    assert any(lb.startswith("sim:0 / ") for lb in labels), labels
    assert len(re.findall(r'<div class="ev"', tl_dom)) == len(xs)
    ops = re.search(r'<table id="ops">(.*?)</table>', tl_dom, re.S).group(1)
    for name in ("conv2d", "linear", "ConvolutionBackward0", "AddmmBackward0", "optim_step"):
        assert f"<td>{name}</td>" in ops, name
    xfer = re.search(r'<table id="xfer">(.*?)</table>', tl_dom, re.S).group(1)
    n_xfer = sum(1 for e in xs if e["cat"] == "gpu_memcpy")
    assert n_xfer >= 3  # the batch and labels in, the loss out
    assert xfer.count("<tr>") == n_xfer + 1
    assert "<td>HtoD</td>" in xfer and "<td>DtoH</td>" in xfer

    # the snapshot viewer: every segment and block drawn, every live block a row
    segs = snap["segments"]
    n_blocks = sum(len(s["blocks"]) for s in segs)
    assert status(mem_dom) == f"rendered {len(segs)} segments, {n_blocks} blocks"
    assert len(re.findall(r'<div class="seg"', mem_dom)) == len(segs)
    live = sum(1 for s in segs for b in s["blocks"] if b["state"] != "inactive")
    table = re.search(r'<table id="blocks">(.*?)</table>', mem_dom, re.S).group(1)
    assert table.count("<tr>") == live + 1
    for png in (tl_png, mem_png):
        assert os.path.getsize(png) > 10000, png  # a rendered page, not a blank one
