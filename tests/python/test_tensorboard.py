"""tessera.utils.tensorboard.SummaryWriter: the event files are read back by a small independent
reader here (TFRecord framing with both masked CRC-32Cs, the protobuf wire format, PNG chunks and
pixels), without the tensorboard, protobuf or numpy packages, and checked against references
computed in float64 Python: scalars, histograms (numpy.histogram's bins and TensorBoard's
trimming), images (PyTorch's scaling and layouts), text, hparams, the folder layout of
add_scalars and add_hparams, purge_step, flushing and closing."""
import bisect
import glob
import math
import os
import struct
import warnings
import zlib

import pytest

import tessera as torch
from tessera.utils.tensorboard import SummaryWriter
from tessera.utils.tensorboard.summary import default_bins


# ---------------------------------------------------------------- an independent reader
def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_crc32c_known_answer():
    assert crc32c(b"123456789") == 0xE3069283


def read_records(path):
    data = open(path, "rb").read()
    out, i = [], 0
    while i < len(data):
        assert len(data) - i >= 16, "truncated record"
        (n,) = struct.unpack_from("<Q", data, i)
        assert struct.unpack_from("<I", data, i + 8)[0] == masked_crc(data[i:i + 8]), "length CRC"
        body = data[i + 12:i + 12 + n]
        assert len(body) == n, "truncated record"
        assert struct.unpack_from("<I", data, i + 12 + n)[0] == masked_crc(body), "data CRC"
        out.append(body)
        i += 16 + n
    return out


def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """[(field number, value)]: ints for varints, bytes for the rest."""
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wt}")
        out.append((f, v))
    return out


def one(fs, field, default=None):
    vals = [v for f, v in fs if f == field]
    assert len(vals) <= 1, (field, fs)
    return vals[0] if vals else default


def f64(b):
    return struct.unpack("<d", b)[0]


def f32(b):
    return struct.unpack("<f", b)[0]


def int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def events(path):
    """[(wall_time, step, kind, payload)] of every record after the first, which must be the
    file_version event."""
    recs = read_records(path)
    first = fields(recs[0])
    assert one(first, 3) == b"brain.Event:2"
    out = []
    for r in recs[1:]:
        fs = fields(r)
        wall = f64(one(fs, 1, bytes(8)))
        step = int64(one(fs, 2, 0))
        for kind in (3, 5, 7):
            if one(fs, kind) is not None:
                out.append((wall, step, kind, one(fs, kind)))
    return out


def values(path):
    """[(wall_time, step, tag, {Value field: payload})] of every summary value."""
    out = []
    for wall, step, kind, payload in events(path):
        if kind != 5:
            continue
        for f, v in fields(payload):
            assert f == 1
            vf = fields(v)
            out.append((wall, step, one(vf, 1).decode(), dict((k, x) for k, x in vf if k != 1)))
    return out


def the_file(folder):
    files = glob.glob(os.path.join(folder, "*tfevents*"))
    assert len(files) == 1, files
    return files[0]


# ---------------------------------------------------------------- files and scalars
def test_scalars_and_file_layout(tmp_path):
    d = str(tmp_path / "run")
    with SummaryWriter(d, filename_suffix=".sfx") as w:
        assert w.get_logdir() == d
        for s in range(5):
            w.add_scalar("train/loss", 1.0 / (s + 1), s, walltime=1000.0 + s)
        w.add_scalar("t", torch.tensor([2.5]), -7, walltime=5.0)  # a one-element tensor, step < 0
        w.add_scalar("nostep", 3, walltime=6.0)
        w.add_scalar("big", 1e300, 1, walltime=7.0)  # past float32: an infinity
        w.add_scalar("ns", 0.1, 2, walltime=8.0, new_style=True)
        w.add_scalar("nsd", 0.1, 2, walltime=8.0, new_style=True, double_precision=True)
    path = the_file(d)
    name = os.path.basename(path)
    assert name.startswith("events.out.tfevents.") and name.endswith(".sfx")
    import socket
    assert "." + socket.gethostname() + "." in name
    vals = values(path)
    simple = [(w, s, t, f32(v[2])) for w, s, t, v in vals if 2 in v]
    expect = [(1000.0 + s, s, "train/loss", float(struct.unpack("<f", struct.pack(
        "<f", 1.0 / (s + 1)))[0])) for s in range(5)]
    expect += [(5.0, -7, "t", 2.5), (6.0, 0, "nostep", 3.0), (7.0, 1, "big", math.inf)]
    assert simple == expect
    ns = {t: v for _, _, t, v in vals if 8 in v}
    # tensor summaries with the scalars plugin: DT_FLOAT float_val / DT_DOUBLE double_val
    t = fields(ns["ns"][8])
    assert one(t, 1) == 1 and f32(one(t, 5)) == pytest.approx(0.1, rel=1e-7)
    t = fields(ns["nsd"][8])
    assert one(t, 1) == 2 and f64(one(t, 6)) == 0.1
    for tag in ("ns", "nsd"):
        assert one(fields(one(fields(ns[tag][9]), 1)), 1) == b"scalars"


def test_add_scalars_subfolders(tmp_path):
    d = str(tmp_path / "r")
    w = SummaryWriter(d)
    for s in range(3):
        w.add_scalars("loss/both", {"train": 1.0 + s, "val": torch.tensor(2.0 + s)}, s)
    w.close()
    # PyTorch's layout: log_dir/<main_tag with / as _>_<tag>, each value under tag main_tag
    for sub, base in (("loss_both_train", 1.0), ("loss_both_val", 2.0)):
        vals = values(the_file(os.path.join(d, sub)))
        assert [(s, t, f32(v[2])) for _, s, t, v in vals] == [
            (s, "loss/both", base + s) for s in range(3)]
    assert values(the_file(d)) == []


def test_default_log_dir_and_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1")
    d = w.get_logdir()
    w.close()
    parts = d.split(os.sep)
    assert parts[0] == "runs" and parts[1].endswith("_lr0.1")
    import socket
    assert socket.gethostname() in parts[1]
    assert os.path.isdir(d) and glob.glob(os.path.join(d, "*tfevents*"))


def test_purge_step_and_reopen_after_close(tmp_path):
    d = str(tmp_path / "p")
    w = SummaryWriter(d, purge_step=42)
    w.add_scalar("a", 1.0, 43)
    w.close()
    w.add_scalar("a", 2.0, 44)  # a closed writer opens a new file, as PyTorch's
    w.close()
    files = sorted(glob.glob(os.path.join(d, "*tfevents*")))
    assert len(files) == 2
    ev = [e for f in files for e in events(f)]
    # file_version and SessionLog{status START} at the purge step, then the scalars
    assert [(s, k) for _, s, k, _ in ev] == [(42, 3), (42, 7), (43, 5), (44, 5)]
    assert one(fields(ev[1][3]), 1) == 1


def test_flush_and_max_queue(tmp_path):
    d = str(tmp_path / "q")
    w = SummaryWriter(d, max_queue=3, flush_secs=10 ** 6)
    path = the_file(d)
    size0 = os.path.getsize(path)
    w.add_scalar("x", 1.0, 0)
    w.add_scalar("x", 1.0, 1)
    assert os.path.getsize(path) == size0  # buffered
    w.add_scalar("x", 1.0, 2)  # the third event flushes
    assert len(values(path)) == 3
    w.add_scalar("x", 1.0, 3)
    w.flush()
    assert len(values(path)) == 4
    w.close()
    w.close()  # twice is harmless


# ---------------------------------------------------------------- histograms
def reference_histogram(vals, edges):
    """numpy.histogram with explicit edges, then PyTorch's make_histogram trimming, in float64."""
    nb = len(edges) - 1
    counts = [0] * nb
    for v in vals:
        if edges[0] <= v <= edges[-1]:
            counts[min(bisect.bisect_right(edges, v) - 1, nb - 1)] += 1
    nz = [i for i, c in enumerate(counts) if c]
    start, end = nz[0], nz[-1] + 1
    counts = counts[start - 1:end] if start > 0 else [0] + counts[:end]
    return edges[start:end + 1], counts


def histo_of(path, tag):
    (h,) = [v[5] for _, _, t, v in values(path) if t == tag]
    fs = fields(h)
    scal = {f: f64(one(fs, f, bytes(8))) for f in range(1, 6)}
    lim = one(fs, 6, b"")
    cnt = one(fs, 7, b"")
    return (scal, list(struct.unpack("<%dd" % (len(lim) // 8), lim)),
            list(struct.unpack("<%dd" % (len(cnt) // 8), cnt)))


def test_histograms(tmp_path):
    import random
    rng = random.Random(1)
    vals = [rng.gauss(0.5, 2.0) for _ in range(3000)] + [0.0, 1e-13, -3e-12, 2.0, 2.0]
    d = str(tmp_path / "h")
    w = SummaryWriter(d)
    x = torch.tensor(vals, dtype=torch.float64)
    w.add_histogram("tf", x, 3)
    w.add_histogram("count", x, 4, bins=7)
    w.add_histogram("edges", x.float(), 5, bins=[-1.0, 0.0, 1.0, 2.0])  # 2.0 lands in the last bin
    w.add_histogram("list", [1, 2, 2, 3], 6, bins=3)
    w.close()
    path = the_file(d)
    lo, hi = min(vals), max(vals)
    step = (hi - lo) / 7
    vals32 = [float(struct.unpack("<f", struct.pack("<f", v))[0]) for v in vals]
    cases = {
        "tf": (vals, default_bins()),
        "count": (vals, [i * step + lo for i in range(7)] + [hi]),
        "edges": (vals32, [-1.0, 0.0, 1.0, 2.0]),
        "list": ([1.0, 2.0, 2.0, 3.0], [1.0, 1 + 2 / 3, 1 + 2 * (2 / 3), 3.0]),
    }
    for tag, (v, edges) in cases.items():
        scal, lim, cnt = histo_of(path, tag)
        ref_lim, ref_cnt = reference_histogram(v, edges)
        assert lim == ref_lim and cnt == ref_cnt, tag
        assert scal[1] == min(v) and scal[2] == max(v) and scal[3] == len(v)
        tol = 1e-13 * sum(abs(a) for a in v)
        assert abs(scal[4] - math.fsum(v)) <= tol, tag
        assert abs(scal[5] - math.fsum(a * a for a in v)) <= 1e-13 * math.fsum(a * a for a in v)
    # "tf": TensorBoard's default edges, kept from one empty bucket before the first value
    scal, lim, cnt = histo_of(path, "tf")
    assert cnt[0] == 0 and sum(cnt) == len(vals) and len(lim) == len(cnt)


def test_histogram_errors(tmp_path):
    w = SummaryWriter(str(tmp_path / "e"))
    with pytest.raises(ValueError, match="no element"):
        w.add_histogram("x", torch.zeros(0), 0)
    with pytest.raises(ValueError, match="monoton"):
        w.add_histogram("x", torch.ones(3), 0, bins=[1.0, 0.0])
    with pytest.raises(ValueError, match="auto"):
        w.add_histogram("x", torch.ones(3), 0, bins="auto")
    with pytest.raises(ValueError, match="one element"):
        w.add_scalar("x", torch.ones(2), 0)
    w.close()


# ---------------------------------------------------------------- images
def decode_png(data):
    """(width, height, colour type, rows of pixel bytes) of a PNG using filter 0 only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, chunks = 8, {}
    while i < len(data):
        n, kind = struct.unpack_from(">I4s", data, i)
        body = data[i + 8:i + 8 + n]
        assert struct.unpack_from(">I", data, i + 8 + n)[0] == zlib.crc32(kind + body)
        chunks.setdefault(kind, b"")
        chunks[kind] += body
        i += 12 + n
    w, h, depth, ctype = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and b"IEND" in chunks
    ch = {0: 1, 2: 3, 6: 4}[ctype]
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = w * ch + 1
    assert len(raw) == h * stride
    rows = [raw[y * stride:(y + 1) * stride] for y in range(h)]
    assert all(r[0] == 0 for r in rows)
    return w, h, ch, [list(r[1:]) for r in rows]


def image_of(path, tag):
    (im,) = [v[4] for _, _, t, v in values(path) if t == tag]
    fs = fields(im)
    h, w, c = one(fs, 1), one(fs, 2), one(fs, 3)
    pw, ph, pc, rows = decode_png(one(fs, 4))
    assert (pw, ph, pc) == (w, h, c)
    return h, w, c, rows


def to_u8(v):
    """PyTorch's float image rule: v * 255 in float32, clipped to [0, 255], truncated."""
    s = float(struct.unpack("<f", struct.pack("<f", float(struct.unpack(
        "<f", struct.pack("<f", v))[0]) * 255.0))[0])
    return int(min(max(s, 0.0), 255.0))


def test_images(tmp_path):
    import random
    rng = random.Random(2)
    H, W = 5, 7
    chw = [[[rng.random() * 1.2 - 0.1 for _ in range(W)] for _ in range(H)] for _ in range(3)]
    rgba = [[[rng.randrange(256) for _ in range(4)] for _ in range(3)] for _ in range(4)]
    grey = [[rng.random() for _ in range(W)] for _ in range(H)]
    batch = [[[[rng.random() for _ in range(3)] for _ in range(2)]] for _ in range(10)]
    d = str(tmp_path / "i")
    w = SummaryWriter(d)
    t = torch.tensor(chw)
    w.add_image("chw", t, 1)
    w.add_image("hwc", t.permute(1, 2, 0), 1, dataformats="HWC")
    w.add_image("rgba", torch.tensor(rgba, dtype=torch.uint8), 1)
    w.add_image("hw", torch.tensor(grey), 1, dataformats="HW")
    w.add_image("c1", torch.tensor([grey]), 1)
    w.add_images("batch", torch.tensor(batch), 2)
    with pytest.raises(ValueError, match="dataformats"):
        w.add_image("bad", t, 1, dataformats="CHWW")
    with pytest.raises(ValueError, match="dims"):
        w.add_image("bad", t, 1, dataformats="HW")
    w.close()
    path = the_file(d)
    ref = [[[to_u8(chw[c][y][x]) for c in range(3)] for x in range(W)] for y in range(H)]
    for tag in ("chw", "hwc"):
        h, w_, c, rows = image_of(path, tag)
        assert (h, w_, c) == (H, W, 3)
        assert rows == [[v for px in r for v in px] for r in ref], tag
    h, w_, c, rows = image_of(path, "rgba")
    assert (h, w_, c) == (3, 4, 4)
    assert rows == [[rgba[ch][y][x] for x in range(4) for ch in range(4)] for y in range(3)]
    for tag in ("hw", "c1"):  # grey repeated to RGB, as PyTorch
        h, w_, c, rows = image_of(path, tag)
        assert (h, w_, c) == (H, W, 3)
        assert rows == [[to_u8(grey[y][x]) for x in range(W) for _ in range(3)] for y in range(H)]
    # 10 images of 2x3 in a grid of 8 columns and 2 rows, the empty cells black
    h, w_, c, rows = image_of(path, "batch")
    assert (h, w_, c) == (4, 24, 3)
    for y in range(4):
        for x in range(24):
            n = (y // 2) * 8 + x // 3
            v = to_u8(batch[n][0][y % 2][x % 3]) if n < 10 else 0
            assert rows[y][3 * x:3 * x + 3] == [v, v, v], (y, x)


# ---------------------------------------------------------------- text, hparams, the rest
def test_text(tmp_path):
    d = str(tmp_path / "t")
    with SummaryWriter(d) as w:
        w.add_text("notes", "hello **world** ü", 3)
    ((_, step, tag, v),) = values(the_file(d))
    assert (step, tag) == (3, "notes/text_summary")
    t = fields(v[8])
    assert one(t, 1) == 7  # DT_STRING
    assert one(t, 8) == "hello **world** ü".encode()
    assert fields(one(fields(one(t, 2)), 2)) == [(1, 1)]  # shape [1]
    assert one(fields(one(fields(v[9]), 1)), 1) == b"text"


def test_hparams(tmp_path):
    d = str(tmp_path / "hp")
    w = SummaryWriter(d)
    w.add_hparams({"lr": 0.1, "opt": "adam", "flag": True, "skip": None}, {"hp/acc": 0.75},
                  hparam_domain_discrete={"opt": ["adam", "sgd"]}, run_name="trial")
    w.close()
    vals = values(the_file(os.path.join(d, "trial")))
    tags = [t for _, _, t, _ in vals]
    assert tags == ["_hparams_/experiment", "_hparams_/session_start_info",
                    "_hparams_/session_end_info", "hp/acc"]
    assert f32(vals[3][3][2]) == 0.75
    plugin = [fields(one(fields(v[9]), 1)) for _, _, _, v in vals[:3]]
    assert all(one(p, 1) == b"hparams" for p in plugin)
    exp = fields(one(fields(one(plugin[0], 2)), 2))
    infos = [fields(v) for f, v in exp if f == 4]
    assert [(one(i, 1), one(i, 4)) for i in infos] == [(b"lr", 3), (b"opt", 1), (b"flag", 3)]
    disc = fields(one(infos[1], 5))
    assert [one(fields(v), 3) for _, v in disc] == [b"adam", b"sgd"]
    metric = fields(one(exp, 5))
    assert one(fields(one(metric, 1)), 2) == b"hp/acc"
    start = fields(one(fields(one(plugin[1], 2)), 3))
    hp = {one(fields(v), 1).decode(): fields(one(fields(v), 2)) for _, v in start}
    assert f64(one(hp["lr"], 2)) == 0.1 and one(hp["opt"], 3) == b"adam"
    assert f64(one(hp["flag"], 2)) == 1.0 and "skip" not in hp
    end = fields(one(fields(one(plugin[2], 2)), 4))
    assert one(end, 1) == 1  # STATUS_SUCCESS
    with pytest.raises(TypeError):
        SummaryWriter(str(tmp_path / "x")).add_hparams([], {})


def test_graph_warns_once_and_unsupported(tmp_path):
    w = SummaryWriter(str(tmp_path / "g"))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        w.add_graph(torch.nn.Linear(2, 2), torch.zeros(1, 2))
        w.add_graph(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    assert len(rec) == 1 and "graph" in str(rec[0].message)
    with pytest.raises(NotImplementedError, match="add_audio"):
        w.add_audio("a", torch.zeros(10), 0)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="matplotlib"):
            w.add_figure("f", object(), 0)
    w.close()
    assert values(the_file(str(tmp_path / "g"))) == []


def test_reader_catches_corruption(tmp_path):
    d = str(tmp_path / "c")
    with SummaryWriter(d) as w:
        w.add_scalar("x", 1.0, 1)
    path = the_file(d)
    data = bytearray(open(path, "rb").read())
    data[-6] ^= 0x40
    open(path, "wb").write(bytes(data))
    with pytest.raises(AssertionError, match="CRC"):
        read_records(path)


def test_device_tensors_match_cpu(tmp_path, device):
    import random
    rng = random.Random(3)
    vals = [rng.gauss(0, 1) for _ in range(500)]
    img = [[[rng.random() for _ in range(4)] for _ in range(3)] for _ in range(3)]
    out = {}
    for name, dev in (("ref", "cpu"), ("dev", device)):
        d = str(tmp_path / name)
        with SummaryWriter(d) as w:
            w.add_histogram("h", torch.tensor(vals, device=dev), 1, walltime=1.0)
            w.add_image("i", torch.tensor(img, device=dev), 1, walltime=1.0)
            w.add_scalar("s", torch.tensor(0.5, device=dev), 1, walltime=1.0)
        out[name] = read_records(the_file(d))[1:]
    assert out["ref"] == out["dev"]


def test_event_file_binding_errors(tmp_path):
    from tessera import _C
    path = str(tmp_path / "events.out.tfevents.x")
    h = _C._event_file_create(path, 1.5)
    _C._event_file_write(h, b"\x10\x05")
    with pytest.raises(torch.TesseraError, match="cannot create"):
        _C._event_file_create(path, 1.5)  # never appended to or truncated
    _C._event_file_close(h)
    _C._event_file_close(h)
    with pytest.raises(ValueError, match="closed"):
        _C._event_file_write(h, b"")
    with pytest.raises(ValueError, match="closed"):
        _C._event_file_flush(h)
    with pytest.raises(TypeError, match="handle"):
        _C._event_file_write(object(), b"")
    recs = read_records(path)
    assert len(recs) == 2 and recs[1] == b"\x10\x05"
    assert f64(one(fields(recs[0]), 1)) == 1.5


def test_event_file_handle_dropped_unclosed_is_flushed_and_closed(tmp_path):
    """the capsule's destructor closes the file: its records reach the disk, no descriptor stays"""
    import gc
    from tessera import _C
    path = str(tmp_path / "events.out.tfevents.d")
    fds = len(os.listdir("/proc/self/fd"))
    h = _C._event_file_create(path, 2.5)
    _C._event_file_write(h, b"\x10\x07")
    assert len(os.listdir("/proc/self/fd")) == fds + 1
    del h
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds
    recs = read_records(path)
    assert len(recs) == 2 and recs[1] == b"\x10\x07" and f64(one(fields(recs[0]), 1)) == 2.5


def test_event_file_create_out_of_memory(tmp_path):
    """each Python allocation of _event_file_create failing in turn (CPython's _testcapi hooks):
    MemoryError, the event file closed (no descriptor left), never a crash"""
    _testcapi = pytest.importorskip("_testcapi")
    if not hasattr(_testcapi, "set_nomemory"):
        pytest.skip("no _testcapi.set_nomemory")
    from tessera import _C
    fds = len(os.listdir("/proc/self/fd"))
    failed = 0
    for k in range(8):
        path = str(tmp_path / ("events.out.tfevents.%d" % k))
        h = None
        _testcapi.set_nomemory(k, k + 1)
        try:
            h = _C._event_file_create(path, 1.0)
        except MemoryError:
            failed += 1
        finally:
            _testcapi.remove_mem_hooks()
        if h is not None:
            _C._event_file_close(h)
            del h
        assert len(os.listdir("/proc/self/fd")) == fds, k
    assert failed >= 2  # the path's bytes, the box, the capsule: some of them


def _fd_of(path):
    real = os.path.realpath(path)
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name) == real:
                return int(name)
        except OSError:
            pass
    return None


def test_event_file_write_failure_raises(tmp_path):
    """a failing write (the descriptor pointed at /dev/full) raises OSError from flush or close,
    and a later flush says it failed earlier"""
    from tessera import _C
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    for closing in (False, True):
        path = str(tmp_path / ("events.out.tfevents.full%d" % closing))
        h = _C._event_file_create(path, 1.0)
        fd = _fd_of(path)
        if fd is None:
            _C._event_file_close(h)
            pytest.skip("no /proc/self/fd")
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, fd)
        os.close(full)
        _C._event_file_write(h, b"\x10\x01")
        if closing:
            with pytest.raises(OSError, match="event_file_close: writing"):
                _C._event_file_close(h)
        else:
            with pytest.raises(OSError, match="event_file_flush: writing"):
                _C._event_file_flush(h)
            with pytest.raises(OSError, match="event_file_flush: writing .* failed earlier"):
                _C._event_file_flush(h)
            _C._event_file_close(h)  # the failure was reported once
        with pytest.raises(ValueError, match="closed"):
            _C._event_file_flush(h)


def test_event_file_binding_docs():
    from tessera import _C
    for name, args in (("_event_file_create", "(path, wall_time)"),
                       ("_event_file_write", "(handle, event)"),
                       ("_event_file_flush", "(handle)"), ("_event_file_close", "(handle)")):
        doc = getattr(_C, name).__doc__
        assert doc.startswith(name + args + ": ") and len(doc) > 40, doc


def test_pr_curve(tmp_path):
    import random
    rng = random.Random(4)
    labels = [rng.randrange(2) for _ in range(300)]
    preds = [rng.random() for _ in range(297)] + [1.0, 0.0, 1.25]  # 1.25 is left out
    d = str(tmp_path / "pr")
    with SummaryWriter(d) as w:
        w.add_pr_curve("pr", torch.tensor(labels), torch.tensor(preds, dtype=torch.float64), 5,
                       num_thresholds=11)
    ((_, step, tag, v),) = values(the_file(d))
    assert (step, tag) == (5, "pr")
    meta = fields(one(fields(v[9]), 1))
    assert one(meta, 1) == b"pr_curves" and fields(one(meta, 2)) == [(2, 11)]
    t = fields(v[8])
    assert one(t, 1) == 1 and [one(fields(x), 1) for f, x in fields(one(t, 2))] == [6, 11]
    got = struct.unpack("<66f", one(t, 5))
    # reference: a threshold i/10 counts the predictions p >= i/10 (p in [0, 1]) as positive
    T = 11
    ref = [[], [], [], [], [], []]
    kept = [(y, p) for y, p in zip(labels, preds) if 0 <= p <= 1]
    for i in range(T):
        tp = sum(1 for y, p in kept if y and math.floor(p * (T - 1)) >= i)
        fp = sum(1 for y, p in kept if not y and math.floor(p * (T - 1)) >= i)
        pos = sum(1 for y, _ in kept if y)
        neg = len(kept) - pos
        for row, val in enumerate((tp, fp, neg - fp, pos - tp, tp / max(1e-7, tp + fp),
                                   tp / max(1e-7, pos))):
            ref[row].append(val)
    flat = [x for r in ref for x in r]
    assert list(got) == [struct.unpack("<f", struct.pack("<f", x))[0] for x in flat]


def test_embedding_files(tmp_path):
    d = str(tmp_path / "emb")
    feats = [[0.5, -1.25, 3.0], [2.0, 0.0, 0.125], [1.0, 1.0, 1.0]]
    imgs = [[[[0.1 * (n + 1) + 0.01 * (y * 2 + x) for x in range(2)] for y in range(2)]]
            for n in range(3)]
    with SummaryWriter(d) as w:
        w.add_embedding(torch.tensor(feats), metadata=["a", "b", "c"],
                        label_img=torch.tensor(imgs, dtype=torch.float64), tag="f/x")
        w.add_embedding(torch.tensor(feats), global_step=12)
    sub = os.path.join(d, "00000", "f%2fx")
    assert open(os.path.join(sub, "tensors.tsv")).read() == "".join(
        "\t".join(str(v) for v in r) + "\n" for r in feats)
    assert open(os.path.join(sub, "metadata.tsv")).read() == "a\nb\nc\n"
    # 3 images of 2x2 in a grid of 2 columns on a 4x4 canvas, grey repeated to RGB
    pw, ph, pc, rows = decode_png(open(os.path.join(sub, "sprite.png"), "rb").read())
    assert (pw, ph, pc) == (4, 4, 3)
    for y in range(4):
        for x in range(4):
            n = (y // 2) * 2 + x // 2
            v = int(min(255.0, imgs[n][0][y % 2][x % 2] * 255.0)) if n < 3 else 0
            assert rows[y][3 * x:3 * x + 3] == [v, v, v], (y, x)
    assert os.path.exists(os.path.join(d, "00012", "default", "tensors.tsv"))
    assert open(os.path.join(d, "projector_config.pbtxt")).read() == (
        'embeddings {\n  tensor_name: "f/x:00000"\n  metadata_path: "00000/f%2fx/metadata.tsv"\n'
        '  sprite {\n    image_path: "00000/f%2fx/sprite.png"\n    single_image_dim: 2\n'
        '    single_image_dim: 2\n  }\n  tensor_path: "00000/f%2fx/tensors.tsv"\n}\n'
        'embeddings {\n  tensor_name: "default:00012"\n'
        '  tensor_path: "00012/default/tensors.tsv"\n}\n')
