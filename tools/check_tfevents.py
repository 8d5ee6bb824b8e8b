#!/usr/bin/env python3
"""check_tfevents.py — reads a TensorBoard event file written by Tessera and prints its scalars.

  check_tfevents.py PATH [--expect-sample] [--pure]

PATH is an events.out.tfevents.* file or a folder holding them (e.g. build/tests/logger_sample,
which tests/test_logger.c leaves behind). The file is read twice:
  - by a pure-Python reader here that checks the framing and both CRC-32Cs of every record, the
    first event's file_version, and decodes the protobuf by hand (it fails loudly on a bad record,
    where TensorBoard quietly stops reading the file, taking it for one still being written);
  - by the first library reader at hand: TensorBoard's own EventAccumulator, which loads the folder
    the way the TensorBoard server does (pip install tensorboard), else TensorFlow's
    tf.compat.v1.train.summary_iterator. Both readings must agree.
--expect-sample also checks the values tests/test_logger.c writes into logger_sample/:
train/loss = 1/(1+s), train/accuracy = s/10, lr = 0.1 at steps 0..9 (as float32).
--pure skips the library reader.
Exits 0 when the file reads cleanly (and matches), 1 otherwise.
"""
import glob
import os
import struct
import sys


def event_files(path):
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*tfevents*")))
        if not files:
            sys.exit(f"check_tfevents: no event file in {path}")
        return files
    return [path]


# ---------------------------------------------------------------- 1. TensorBoard
def read_tensorboard(path):
    """{tag: [(step, value, wall_time)]} through the reader the TensorBoard server uses."""
    from tensorboard.backend.event_processing import event_accumulator

    out = {}
    folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
    acc = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    for tag in acc.Tags()["scalars"]:
        out[tag] = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
    return out


# ---------------------------------------------------------------- 2. TensorFlow
def read_tensorflow(path):
    import tensorflow as tf

    out = {}
    for f in event_files(path):
        for e in tf.compat.v1.train.summary_iterator(f):
            for v in e.summary.value:
                out.setdefault(v.tag, []).append((e.step, v.simple_value, e.wall_time))
    return out


# ---------------------------------------------------------------- 3. pure Python
def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _fields(buf):
    """(field, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(buf):
            raise ValueError("truncated field")
        yield field, wire, v


def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def read_pure(path):
    out = {}
    for f in event_files(path):
        data = open(f, "rb").read()
        pos = first = 0
        while pos < len(data):
            if len(data) - pos < 12:
                raise ValueError(f"{f}: truncated record header at byte {pos}")
            head = data[pos:pos + 8]
            (n,) = struct.unpack("<Q", head)
            (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
            if hcrc != masked_crc32c(head):
                raise ValueError(f"{f}: bad length CRC at byte {pos}")
            body = data[pos + 12:pos + 12 + n]
            if len(body) != n or len(data) < pos + 16 + n:
                raise ValueError(f"{f}: truncated record at byte {pos}")
            (dcrc,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
            if dcrc != masked_crc32c(body):
                raise ValueError(f"{f}: bad data CRC at byte {pos}")
            pos += 16 + n
            wall, step, version, values = 0.0, 0, None, []
            for field, wire, v in _fields(body):
                if field == 1 and wire == 1:
                    (wall,) = struct.unpack("<d", v)
                elif field == 2 and wire == 0:
                    step = v - (1 << 64) if v >= 1 << 63 else v
                elif field == 3 and wire == 2:
                    version = v.decode()
                elif field == 5 and wire == 2:
                    for sf, sw, sv in _fields(v):
                        if sf == 1 and sw == 2:
                            tag, val = None, None
                            for vf, vw, vv in _fields(sv):
                                if vf == 1 and vw == 2:
                                    tag = vv.decode()
                                elif vf == 2 and vw == 5:
                                    (val,) = struct.unpack("<f", vv)
                            values.append((tag, val))
            if first == 0 and version != "brain.Event:2":
                raise ValueError(f"{f}: the first event has no file_version brain.Event:2")
            first += 1
            for tag, val in values:
                out.setdefault(tag, []).append((step, val, wall))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    path = args[0]
    scalars = read_pure(path)  # raises on any damage
    name = "pure-python (CRCs checked)"
    if "--pure" not in sys.argv:
        for lib, reader in (("tensorboard", read_tensorboard), ("tensorflow", read_tensorflow)):
            try:
                got = reader(path)
            except ImportError:
                continue
            drop_wall = lambda d: {t: [(s, v) for s, v, _ in p] for t, p in d.items()}
            if drop_wall(got) != drop_wall(scalars):
                print(f"MISMATCH: {lib} reads other scalars than the CRC-checking reader")
                return 1
            name = f"{lib} (agrees with the pure-python reader, CRCs checked)"
            break
    print(f"reader: {name}")
    for tag in sorted(scalars):
        pts = scalars[tag]
        print(f"{tag}: {len(pts)} points")
        for step, value, wall in pts:
            print(f"  step {step:>4}  value {value:.9g}  wall_time {wall:.6f}")
    if "--expect-sample" in sys.argv:
        f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
        want = {
            "train/loss": [(s, f32(1 / (1 + s))) for s in range(10)],
            "train/accuracy": [(s, f32(s / 10)) for s in range(10)],
            "lr": [(s, f32(0.1)) for s in range(10)],
        }
        got = {t: [(s, v) for s, v, _ in pts] for t, pts in scalars.items()}
        if got != want:
            print("MISMATCH with the values tests/test_logger.c writes")
            return 1
        print("OK: every scalar matches what tests/test_logger.c wrote")
    return 0


if __name__ == "__main__":
    sys.exit(main())
