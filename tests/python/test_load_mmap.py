"""tessera.load(mmap=True) (issue 53: the module_load_state_dict_tips recipe): the storages are a
private memory map of the file, so the values are the same as a plain load, writes stay in
memory, and f must be a path. The checkpoints PyTorch 2.15 wrote (tests/data/pt) and Tessera's own."""
import io
import pathlib
import zipfile

import numpy as np
import pytest

import tessera

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "pt"


def _np(t):
    t = t.detach()
    return (t.to(tessera.float32) if t.dtype == tessera.bfloat16 else t).numpy()


@pytest.mark.parametrize("name", ["dtypes", "views", "checkpoint"])
def test_pytorch_files_load_the_same_values(name):
    with np.load(DATA / (name + ".npz")) as z:
        ref = {k: z[k] for k in z.files}
    got = tessera.load(DATA / (name + ".pt"), mmap=True)
    flat = {}

    def walk(o, key=""):
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, "%s.%s" % (key, k) if key else str(k))
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(v, "%s.%d" % (key, i))
        elif isinstance(o, tessera.Tensor):
            flat[key] = o

    walk(got)
    assert set(ref) <= set(flat) and ref
    for k, v in ref.items():
        assert tuple(flat[k].shape) == v.shape, k
        np.testing.assert_array_equal(_np(flat[k]), v.astype(_np(flat[k]).dtype), err_msg=k)


def test_writes_stay_in_memory_and_views_share(tmp_path):
    p = tmp_path / "m.pt"
    base = tessera.arange(12.0).view(3, 4)
    tessera.save({"base": base, "t": base.t(), "row": base[1]}, p)
    before = p.read_bytes()
    sd = tessera.load(p, mmap=True)
    np.testing.assert_array_equal(_np(sd["t"]), np.arange(12.0).reshape(3, 4).T)
    sd["base"][1, 2] = 100.0
    assert float(sd["row"][2]) == 100.0 and float(sd["t"][2, 1]) == 100.0  # one storage
    assert p.read_bytes() == before  # private map: the file is unchanged
    np.testing.assert_array_equal(_np(tessera.load(p)["base"]), np.arange(12.0).reshape(3, 4))
    sd2 = tessera.load(str(p), mmap=True)  # a second map sees the file, not the first's writes
    assert float(sd2["base"][1, 2]) == 6.0


def test_f_must_be_a_path(tmp_path):
    p = tmp_path / "m.pt"
    tessera.save(tessera.ones(3), p)
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap"):
        tessera.load(io.BytesIO(p.read_bytes()), mmap=True)
    with open(p, "rb") as f:
        with pytest.raises(ValueError, match="file path"):
            tessera.load(f, mmap=True)


def test_a_compressed_record_is_refused(tmp_path):
    src, dst = tmp_path / "a.pt", tmp_path / "b.pt"
    tessera.save({"w": tessera.arange(64.0)}, src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            info.compress_type = zipfile.ZIP_DEFLATED if "/data/" in info.filename \
                else zipfile.ZIP_STORED
            zout.writestr(info, data)
    np.testing.assert_array_equal(_np(tessera.load(dst)["w"]), np.arange(64.0))
    with pytest.raises(tessera.FormatError, match="compressed"):
        tessera.load(dst, mmap=True)
