#!/usr/bin/env python3
"""gen_pt_corpus.py — writes the PyTorch-checkpoint fuzz corpus, tests/fuzz/corpus/pt/.

Two kinds of files (tests/fuzz/fuzz_pt.c tells them apart by the first byte):
  <name>.pt   the checkpoints of tests/data/pt (written by PyTorch, tools/make_pt_fixtures.py):
              whole zips, for the zip layer
  <name>.pkl  bare pickles, which the fuzz target puts in a checkpoint of its own as data.pkl
              with storages "0" to "7" of 256 bytes each: the data.pkl of each fixture, and
              pickles built here (every opcode family the reader runs, views, dtypes, protocol 4)

No third-party code: the pickles are written byte by byte with struct, as torch.save lays them out.
Usage: python3 tools/gen_pt_corpus.py   (from anywhere; rewrites the corpus)
"""
import os
import shutil
import struct
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "data", "pt")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "pt")


def s(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i(v):
    return b"J" + struct.pack("<i", v)


def ints(vals):
    return b"(" + b"".join(i(v) for v in vals) + b"t"


def storage(stype, key, numel, module=b"torch"):
    return (b"(" + s("storage") + b"c" + module + b"\n" + stype + b"\n" + s(key) + s("cpu") +
            i(numel) + b"tQ")


def tensor(stype, key, numel, offset, size, stride):
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage(stype, key, numel) + i(offset) +
            ints(size) + ints(stride) + b"\x89ccollections\nOrderedDict\n)RtR")


def tensor_v3(dtype, key, nbytes, offset, size, stride):
    return (b"ctorch._utils\n_rebuild_tensor_v3\n(" +
            storage(b"UntypedStorage", key, nbytes, b"torch.storage") + i(offset) + ints(size) +
            ints(stride) + b"\x89ccollections\nOrderedDict\n)Rctorch\n" + dtype + b"\ntR")


def built():
    f32 = lambda key, off, size, stride: tensor(b"FloatStorage", key, 64, off, size, stride)
    cases = {
        # a state dict: an OrderedDict with _metadata set by BUILD, views of one storage
        "state_dict": b"\x80\x02ccollections\nOrderedDict\n)Rq\x00(" +
        s("w") + f32("0", 0, [4, 16], [16, 1]) + b"q\x01" +
        s("t") + f32("0", 0, [16, 4], [1, 16]) +
        s("row") + f32("0", 32, [16], [1]) +
        s("exp") + f32("1", 3, [5, 7], [0, 0]) +
        s("tied") + b"h\x01u}(" + s("_metadata") + b"}ub.",
        # every dtype Tessera has, over storages 2 to 7
        "dtypes": b"\x80\x02}(" +
        s("f64") + tensor(b"DoubleStorage", "2", 32, 0, [4, 8], [8, 1]) +
        s("f16") + tensor(b"HalfStorage", "3", 128, 1, [3], [2]) +
        s("bf16") + tensor(b"BFloat16Storage", "4", 128, 0, [128], [1]) +
        s("i64") + tensor(b"LongStorage", "5", 32, 0, [2, 2], [1, 2]) +
        s("u8") + tensor(b"ByteStorage", "6", 256, 0, [16, 16], [16, 1]) +
        s("bool") + tensor(b"BoolStorage", "7", 256, 0, [256], [1]) +
        s("i8") + tensor(b"CharStorage", "6", 256, 0, [8], [1]) +
        s("i16") + tensor(b"ShortStorage", "5", 128, 0, [1], [1]) +
        s("i32") + tensor(b"IntStorage", "5", 64, 0, [], []) +
        s("u16") + tensor_v3(b"uint16", "4", 256, 0, [4], [1]) +
        s("u32") + tensor_v3(b"uint32", "3", 256, 0, [2], [1]) +
        s("u64") + tensor_v3(b"uint64", "2", 256, 0, [2], [1]) + b"u.",
        # a nested checkpoint: lists, tuples, int keys, numbers, strings, None, a Parameter
        "nested": b"\x80\x02}(" + s("epoch") + b"K\x03" + s("loss") + b"G?\xd0" + bytes(6) +
        s("best") + b"N" + s("big") + b"\x8a\x06\x00\x00\x00\x00\x00\x01" +
        s("model") + b"}(" + s("p") + b"ctorch._utils\n_rebuild_parameter\n(" +
        f32("0", 0, [8], [1]) + b"\x88ccollections\nOrderedDict\n)RtRu" +
        s("optimizer") + b"}(" + s("state") + b"}(K\x00}(" + s("exp_avg") +
        f32("1", 0, [8], [1]) + b"uu" + s("groups") + b"](}(" + s("lr") + b"G?\x84" +
        bytes(6) + b"ue" + s("pair") + b"(" + f32("2", 0, [2], [1]) + b"\x89tuu.",
        # protocol 4: FRAME, SHORT_BINUNICODE, STACK_GLOBAL, MEMOIZE, torch.Size
        "protocol4": b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94" +
        b"\x8c\x0ctorch._utils\x94\x8c\x12_rebuild_tensor_v2\x94\x93\x94(" +
        storage(b"FloatStorage", "0", 64) + b"K\x00\x8c\x05torch\x94\x8c\x04Size\x94\x93\x94" +
        b"K\x02K\x03\x86\x85R\x94K\x03K\x01\x86\x89N\x8f\x94tR\x94u.",
        # found by the fuzzer: no tensor at all; a MARK and LIST before anything was pushed
        "no_tensors": b"\x80\x02}(" + s("epoch") + b"K\x03u.",
        "mark_list": b"\x80\x02(l.",
        # refused: os.system, a module's class, a legacy tensor, a complex storage
        "os_system": b"\x80\x02cposix\nsystem\n\x8c\x02ls\x85R.",
        "module": b"\x80\x02ctorch.nn.modules.linear\nLinear\n)\x81.",
        "complex": b"\x80\x02}(" + s("c") +
        tensor(b"ComplexFloatStorage", "0", 32, 0, [32], [1]) + b"u.",
    }
    return cases


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    os.makedirs(CORPUS)
    for name in sorted(os.listdir(FIXTURES)):
        if not name.endswith(".pt"):
            continue
        src = os.path.join(FIXTURES, name)
        shutil.copyfile(src, os.path.join(CORPUS, name))
        with zipfile.ZipFile(src) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
            data = z.read(pkl)
        with open(os.path.join(CORPUS, name[:-3] + ".pkl"), "wb") as f:
            f.write(data)
    for name, data in built().items():
        with open(os.path.join(CORPUS, "built_" + name + ".pkl"), "wb") as f:
            f.write(data)
    print("wrote", len(os.listdir(CORPUS)), "files to", CORPUS)


if __name__ == "__main__":
    main()
