#!/usr/bin/env python3
"""gen_onnx_corpus.py — writes the ONNX fuzz corpus, tests/fuzz/corpus/onnx/.

Valid seeds are copied from ONNX's backend test suite (Debian's libonnx-testdata): small models of
a few hundred bytes covering elementwise operators, Conv, Reshape, MatMul, Gemm, pooling,
BatchNormalization, Constant and the control flow of If and Loop. Hostile files are written here
with a minimal protobuf encoder (the standard library only): a model whose graph has a cycle, a
dangling input, a value written twice, an unknown operator, domain or opset, sub-graphs nested 17
deep, raw data shorter than its dims, dims whose product overflows, a negative dim, rank 9, a
float (NaN, 1e30) where an integer attribute belongs, external data with an absolute path or
"..", int8 and string types, a sequence input, no graph; and byte edits of the copied seeds (cut
short, a varint made endless, a length past the end).
ctest replays the folder through tests/fuzz/fuzz_onnx.c (fuzz_onnx_corpus); tools/fuzz.sh starts
from it.

Usage: python3 tools/gen_onnx_corpus.py [TESTDATA]   (default /usr/share/libonnx-testdata/data;
rewrites the corpus)
"""
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "onnx")
TESTDATA = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/libonnx-testdata/data"

SEEDS = [
    "node/test_add", "node/test_relu", "node/test_conv_with_strides_padding",
    "node/test_reshape_negative_dim", "node/test_reshape_extended_dims", "node/test_if",
    "node/test_loop11", "node/test_matmul_2d", "node/test_gemm_default_single_elem_vector_bias",
    "node/test_maxpool_2d_default", "node/test_batchnorm_example", "node/test_constant",
    "node/test_gather_0", "node/test_shape", "node/test_cast_FLOAT_to_DOUBLE",
    "node/test_softmax_axis_1",
]

# ------------------------------------------------------------------ protobuf encoding
FLOAT, UINT8, INT8, INT32, INT64, STRING, BOOL = 1, 2, 3, 6, 7, 8, 9


def varint(v):
    v &= (1 << 64) - 1  # negative int64 as protobuf writes it: ten bytes
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def vint(field, v):
    return key(field, 0) + varint(v)


def blob(field, data):
    if isinstance(data, str):
        data = data.encode()
    return key(field, 2) + varint(len(data)) + data


def tensor(name, dtype, dims, raw=None, external=None):
    b = b"".join(vint(1, d) for d in dims) + vint(2, dtype) + blob(8, name)
    if raw is not None:
        b += blob(9, raw)
    if external is not None:
        for k, v in external.items():
            b += blob(13, blob(1, k) + blob(2, v))
        b += vint(14, 1)
    return b


def tensor_type(elem, dims):
    shape = b"".join(blob(1, vint(1, d) if isinstance(d, int) else blob(2, d)) for d in dims)
    return blob(1, vint(1, elem) + blob(2, shape))


def value(name, typ=None):
    return blob(1, name) + (blob(2, typ) if typ is not None else b"")


def node(op, ins, outs, name="", domain=None, attrs=b""):
    b = b"".join(blob(1, i) for i in ins) + b"".join(blob(2, o) for o in outs)
    b += blob(3, name) + blob(4, op) + attrs
    if domain is not None:
        b += blob(7, domain)
    return b


def float_attr(name, f):
    """an attribute holding a float (type FLOAT, field f: fixed32), where operators want an int"""
    return blob(5, blob(1, name) + vint(20, 1) + key(2, 5) + struct.pack("<f", f))


def graph_attr(name, g):
    return blob(5, blob(1, name) + vint(20, 5) + blob(6, g))


def graph(nodes, inputs, outputs, inits=()):
    return (b"".join(blob(1, n) for n in nodes) + blob(2, "g") +
            b"".join(blob(5, t) for t in inits) + b"".join(blob(11, i) for i in inputs) +
            b"".join(blob(12, o) for o in outputs))


def model(g, opset=13, domain=""):
    m = vint(1, 8) + blob(2, "gen_onnx_corpus")
    if g is not None:
        m += blob(7, g)
    if opset is not None:
        m += blob(8, blob(1, domain) + vint(2, opset))
    return m


X = value("x", tensor_type(FLOAT, [2, 3]))
Y = value("y", tensor_type(FLOAT, [2, 3]))
W = struct.pack("<6f", -3, -2, -1, 0, 1, 2)


def base(w=None, extra_nodes=(), inputs=(), opset=13, relu_domain=None, op="Relu"):
    """y = Relu(x + w), x and w float [2, 3]"""
    w = w if w is not None else tensor("w", FLOAT, [2, 3], W)
    nodes = [node("Add", ["x", "w"], ["a"], "add0"), node(op, ["a"], ["y"], "relu0", relu_domain)]
    return model(graph(nodes + list(extra_nodes), [X] + list(inputs), [Y], [w]), opset)


def nested(depth):
    sub = None
    for d in range(depth, -1, -1):
        attrs = graph_attr("body", sub) if sub is not None else b""
        n = node("Identity", ["x"], ["s%d" % d], attrs=attrs)
        if d:
            sub = graph([n], [], [value("s%d" % d)])
        else:
            return model(graph([n, node("Relu", ["s0"], ["y"])], [X], [Y]))


def hostile():
    seq = blob(4, blob(1, tensor_type(FLOAT, [3])))
    return {
        "valid_base": base(),
        "valid_symbolic": model(graph([node("Relu", ["x"], ["y"])],
                                      [value("x", tensor_type(FLOAT, ["N", 3]))],
                                      [value("y", tensor_type(FLOAT, ["N", 3]))])),
        "deep_nested_16": nested(16),
        "no_graph": model(None),
        "no_opset": model(graph([node("Relu", ["x"], ["y"])], [X], [Y]), opset=None),
        "opset_18": base(opset=18),
        "opset_0": base(opset=0),
        "unknown_op": base(op="FooBar"),
        "unknown_domain": base(relu_domain="com.microsoft"),
        "cycle": model(graph([node("Relu", ["b"], ["a"]), node("Relu", ["a"], ["b"])], [X],
                             [value("b")])),
        "dangling_input": model(graph([node("Relu", ["zz"], ["y"])], [X], [Y])),
        "dangling_output": model(graph([node("Relu", ["x"], ["a"])], [X], [Y])),
        "written_twice": base(extra_nodes=[node("Relu", ["x"], ["a"])]),
        "nested_17": nested(17),
        "raw_short": base(tensor("w", FLOAT, [2, 3], W[:20])),
        "raw_long": base(tensor("w", FLOAT, [2, 3], W + b"\0\0\0\0")),
        "dims_overflow": base(tensor("w", FLOAT, [1 << 40, 1 << 40, 1 << 40], W)),
        "dims_negative": base(tensor("w", FLOAT, [-2, -3], W)),
        "rank_9": base(tensor("w", FLOAT, [1, 1, 1, 1, 1, 1, 1, 2, 3], W)),
        "input_rank_9": model(graph([node("Relu", ["x"], ["y"])],
                                    [value("x", tensor_type(FLOAT, [1] * 9))], [Y])),
        "int8_init": base(tensor("w", INT8, [2, 3], W[:6])),
        "string_input": base(inputs=[value("s", tensor_type(STRING, [2]))]),
        "sequence_input": base(inputs=[value("seq", seq)]),
        "external_absolute": base(tensor("w", FLOAT, [2, 3], None, {"location": "/etc/passwd"})),
        "external_dotdot": base(tensor("w", FLOAT, [2, 3], None, {"location": "../w.bin"})),
        "external_no_folder": base(tensor("w", FLOAT, [2, 3], None, {"location": "w.bin"})),
        "float_axis_nan": model(graph([node("Softmax", ["x"], ["y"],
                                            attrs=float_attr("axis", float("nan")))], [X], [Y])),
        "float_axis_huge": model(graph([node("Softmax", ["x"], ["y"],
                                             attrs=float_attr("axis", 1e30))], [X], [Y])),
        "huge_length": bytes([0x3A]) + varint(1 << 40),
        "empty": b"",
    }


def edits(name, data):
    """byte edits of a seed: cut at a third and at two thirds, one byte short, an endless varint,
    every length-like byte 0xff"""
    out = {}
    for frac in (3, 2):
        out["%s_cut%d" % (name, frac)] = data[: len(data) // frac]
    out[name + "_cut1"] = data[:-1]
    mid = len(data) // 2
    out[name + "_varint"] = data[:mid] + b"\xff" * 11 + data[mid + 11:]
    out[name + "_len"] = bytes(0xFF if 0 < i < 4 else b for i, b in enumerate(data))
    return out


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    os.makedirs(CORPUS)
    files = {("" if k.startswith("valid") else "bad_") + k + ".onnx": v
             for k, v in hostile().items()}
    missing = []
    for seed in SEEDS:
        path = os.path.join(TESTDATA, seed, "model.onnx")
        if not os.path.exists(path):
            missing.append(seed)
            continue
        with open(path, "rb") as f:
            data = f.read()
        name = os.path.basename(seed)[5:]  # test_add -> add
        files["seed_%s.onnx" % name] = data
        if seed in ("node/test_conv_with_strides_padding", "node/test_if", "node/test_add"):
            for k, v in edits(name, data).items():
                files["edit_%s.onnx" % k] = v
    for name, data in sorted(files.items()):
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
    print("gen_onnx_corpus: %d files in %s%s" % (len(files), CORPUS,
          "; missing seeds (no libonnx-testdata?): " + ", ".join(missing) if missing else ""))


if __name__ == "__main__":
    main()
