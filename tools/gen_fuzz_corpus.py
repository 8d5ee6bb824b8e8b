#!/usr/bin/env python3
"""gen_fuzz_corpus.py — writes the safetensors fuzz corpus and the table of expected results.

Each case is a whole file built with struct + json (no third-party code), written to
tests/fuzz/corpus/safetensors/<name>.safetensors; tests/fuzz/corpus/safetensors.tsv lists, per file,
the status Tessera must return and a fragment of its message (tests/test_fuzz_corpus.c checks both).

When the Python `safetensors` package is installed, every file is also given to its reader as an
independent reference: the script fails if a file we call valid is refused by it, or one we call
malformed is accepted by it, except for the cases marked `stricter` below, where Tessera refuses on
purpose what the Python reader lets through (unknown fields, a metadata key given twice, bool bytes
other than 0/1, dtypes or ranks Tessera cannot hold).

Usage: python3 tools/gen_fuzz_corpus.py   (from the repository root; rewrites the corpus)
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "safetensors")
TABLE = os.path.join(ROOT, "tests", "fuzz", "corpus", "safetensors.tsv")

SIZES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1,
         "I8": 1, "I16": 2, "U16": 2, "F8_E4M3": 1}


def header_bytes(obj, pad=True):
    """Compact JSON like the Python writer; obj may already be a str (hand-made JSON)."""
    text = obj if isinstance(obj, (str, bytes)) else json.dumps(obj, separators=(",", ":"))
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    if pad:
        raw += b" " * ((8 - len(raw) % 8) % 8)
    return raw


def st_file(obj, data=b"", pad=True, length=None):
    raw = header_bytes(obj, pad)
    n = len(raw) if length is None else length
    return struct.pack("<Q", n) + raw + data


def tensors(*specs, meta=None):
    """specs: (name, dtype, shape, data bytes) packed back to back from offset 0."""
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, blob in specs:
        hdr[name] = {"dtype": dtype, "shape": shape,
                     "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    return hdr, data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


CASES = []  # (name, bytes, expected status, message fragment, stricter than Python)


def case(name, blob, status, fragment="", stricter=False):
    CASES.append((name, blob, status, fragment, stricter))


def ok(name, blob):
    case(name, blob, "TS_OK")


def bad(name, blob, fragment, stricter=False):
    case(name, blob, "TS_ERR_FORMAT", fragment, stricter)


def build():
    # ---- valid files
    ok("ok_empty", st_file({}))
    h, d = tensors(("fc1.weight", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)))
    ok("ok_f32", st_file(h, d))
    h, d = tensors(("f32", "F32", [2], f32(1.5, -2)),
                   ("f64", "F64", [1], struct.pack("<d", 3.25)),
                   ("f16", "F16", [2], struct.pack("<2H", 0x3C00, 0xC000)),
                   ("bf16", "BF16", [2], struct.pack("<2H", 0x3F80, 0xC000)),
                   ("i64", "I64", [2], struct.pack("<2q", -(2 ** 40), 7)),
                   ("i32", "I32", [1, 1], struct.pack("<i", -5)),
                   ("u8", "U8", [3], bytes([0, 128, 255])),
                   ("bool", "BOOL", [2], bytes([1, 0])),
                   meta={"format": "pt", "note": "every dtype"})
    ok("ok_all_dtypes", st_file(h, d))
    h, d = tensors(("scalar", "F64", [], struct.pack("<d", 2.5)), ("empty", "F32", [0], b""),
                   ("empty3", "I64", [2, 0, 3], b""))
    ok("ok_scalar_and_empty", st_file(h, d))
    h, d = tensors(("x", "F32", [1], f32(1)))
    ok("ok_unpadded_header", st_file(h, d, pad=False))
    pretty = json.dumps(h, indent=2) + "\n"
    ok("ok_whitespace_header", st_file(pretty, d, pad=False))
    # JSON order differs from offset order
    d2 = f32(1, 2) + f32(3)
    ok("ok_keys_not_in_offset_order",
       st_file('{"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},'
               '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', d2))
    ok("ok_zero_dim_with_huge_dim",
       st_file({"z": {"dtype": "F32", "shape": [0, 2 ** 53], "data_offsets": [0, 0]}}))
    ok("ok_many_empty_tensors",
       st_file({"t%04d" % i: {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
                for i in range(300)}))
    ok("ok_unicode_name", st_file(*tensors(("poids.é✓", "F32", [1], f32(4)))))

    # ---- the 8-byte length
    bad("trunc_empty_file", b"", "too short for the 8-byte header length")
    bad("trunc_length_5_bytes", b"\x10\x00\x00\x00\x00", "too short for the 8-byte header length")
    bad("length_over_100MB", st_file({}, length=100_000_001), "over the limit of 16777216 bytes")
    # Tessera's own limit (16 MiB; a hostile header must not cost gigabytes to parse)
    bad("length_over_16MiB", st_file({}, length=(16 << 20) + 1), "over the limit of 16777216 bytes")
    bad("length_2pow64_minus_1", st_file({}, length=2 ** 64 - 1), "over the limit")
    bad("length_past_file", st_file({}, length=1000), "is more than the 8 bytes after it")
    bad("length_zero", st_file({}, length=0), "not valid JSON")
    # ---- the JSON
    bad("invalid_json_truncated", st_file('{"a":{"dtype":', pad=False), "not valid JSON")
    bad("invalid_json_binary", struct.pack("<Q", 16) + bytes(range(200, 216)), "not valid UTF-8")
    bad("invalid_json_single_quotes", st_file("{'a': 1}"), "not valid JSON")
    bad("invalid_utf8_name", st_file(b'{"\xff":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
        "not valid UTF-8")
    bad("nul_in_header", st_file(b'{"a\x00b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
        "")
    bad("non_object_array", st_file("[1, 2, 3]"), "not a JSON object")
    bad("non_object_string", st_file('"weights"'), "not a JSON object")
    bad("non_object_number", st_file("42"), "not a JSON object")
    bad("non_object_null", st_file("null"), "not a JSON object")
    bad("deep_nesting", st_file("[" * 5000 + "]" * 5000), "header nests deeper than 3 levels (byte 3)")
    bad("depth_4", st_file({"a": {"dtype": "F32", "shape": [[1]], "data_offsets": [0, 4]}}, f32(1)),
        "header nests deeper than 3 levels (byte 29)")
    # brackets inside strings are not nesting
    ok("ok_brackets_in_names", st_file(*tensors(('[[[{"x\\', "F32", [1], f32(2)))))
    bad("trailing_garbage_in_header", st_file('{} xyz'), "unexpected bytes after the JSON header")
    # ---- one tensor's fields
    bad("tensor_not_object", st_file({"a": 5}), "tensor 'a': expected an object")
    bad("missing_dtype", st_file({"a": {"shape": [1], "data_offsets": [0, 4]}}, f32(1)),
        "tensor 'a': missing field \"dtype\"")
    bad("missing_shape", st_file({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, f32(1)),
        "missing field \"shape\"")
    bad("missing_offsets", st_file({"a": {"dtype": "F32", "shape": [1]}}, f32(1)),
        "missing field \"data_offsets\"")
    bad("extra_field", st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4],
                                      "requires_grad": True}}, f32(1)),
        "unexpected field \"requires_grad\"", stricter=True)
    bad("duplicate_field", st_file('{"a":{"dtype":"F32","dtype":"F32","shape":[1],'
                                   '"data_offsets":[0,4]}}', f32(1)), "field \"dtype\" appears twice")
    bad("dtype_unknown", st_file({"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}},
                                 f32(1)), "unknown dtype \"F33\"")
    bad("dtype_lowercase", st_file({"a": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}},
                                   f32(1)), "unknown dtype \"f32\"")
    bad("dtype_torch_name", st_file({"a": {"dtype": "float32", "shape": [1],
                                           "data_offsets": [0, 4]}}, f32(1)), "unknown dtype")
    bad("dtype_not_string", st_file({"a": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}},
                                    f32(1)), "dtype is not a string")
    bad("shape_negative_dim", st_file({"a": {"dtype": "F32", "shape": [-1, 4],
                                             "data_offsets": [0, 16]}}, f32(1, 2, 3, 4)),
        "shape dim 0 is not an integer")
    bad("shape_fractional_dim", st_file({"a": {"dtype": "F32", "shape": [2.5],
                                               "data_offsets": [0, 8]}}, f32(1, 2)),
        "shape dim 0 is not an integer")
    bad("shape_huge_dim", st_file('{"a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,4]}}',
                                  f32(1)), "shape dim 0 is not an integer")
    bad("shape_dim_2pow64", st_file('{"a":{"dtype":"U8","shape":[18446744073709551616],'
                                    '"data_offsets":[0,1]}}', b"\x00"), "not an integer")
    bad("shape_not_array", st_file({"a": {"dtype": "F32", "shape": "2x3", "data_offsets": [0, 4]}},
                                   f32(1)), "shape is not an array")
    bad("shape_string_dim", st_file({"a": {"dtype": "F32", "shape": ["1"],
                                           "data_offsets": [0, 4]}}, f32(1)), "not an integer")
    bad("numel_overflow", st_file({"a": {"dtype": "F32", "shape": [2 ** 32, 2 ** 32, 16],
                                         "data_offsets": [0, 4]}}, f32(1)), "more than 2^64 bytes")
    bad("bytes_overflow", st_file({"a": {"dtype": "F64", "shape": [2 ** 53, 2 ** 8],
                                         "data_offsets": [0, 8]}}, f32(1, 2)),
        "more than 2^64 bytes")
    bad("size_mismatch", st_file({"fc1.weight": {"dtype": "F32", "shape": [3, 4],
                                                 "data_offsets": [0, 100]}}, bytes(100)),
        "tensor 'fc1.weight': data_offsets [0, 100] hold 100 bytes but shape [3, 4] of F32 "
        "needs 48")
    bad("size_mismatch_scalar", st_file({"s": {"dtype": "F64", "shape": [],
                                               "data_offsets": [0, 4]}}, f32(1)),
        "hold 4 bytes but shape [] of F64 needs 8")
    # ---- data_offsets
    bad("offsets_one_value", st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}},
                                     f32(1)), "data_offsets is not [begin, end]")
    bad("offsets_three_values", st_file({"a": {"dtype": "F32", "shape": [1],
                                               "data_offsets": [0, 4, 8]}}, f32(1, 2)),
        "data_offsets is not [begin, end]")
    bad("offsets_object", st_file({"a": {"dtype": "F32", "shape": [1],
                                         "data_offsets": {"begin": 0, "end": 4}}}, f32(1)),
        "data_offsets is not [begin, end]")
    bad("offsets_negative", st_file({"a": {"dtype": "F32", "shape": [1],
                                           "data_offsets": [-4, 0]}}, f32(1)),
        "data_offsets is not [begin, end]")
    bad("offsets_fractional", st_file({"a": {"dtype": "U8", "shape": [1],
                                             "data_offsets": [0, 0.5]}}, b"\x01"),
        "data_offsets is not [begin, end]")
    bad("offsets_reversed", st_file({"a": {"dtype": "F32", "shape": [1],
                                           "data_offsets": [4, 0]}}, f32(1)), "end before they begin")
    bad("offsets_past_end", st_file({"a": {"dtype": "F32", "shape": [16],
                                           "data_offsets": [0, 64]}}, f32(1, 2, 3, 4)),
        "pass the end of the 16-byte data section")
    bad("offsets_overlap", st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                                   f32(1, 2, 3)),
        "tensor 'b': data_offsets [4, 12] do not start where tensor 'a' ends (8)")
    bad("offsets_same_region", st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "b": {"dtype": "F32", "shape": [2],
                                              "data_offsets": [0, 8]}}, f32(1, 2)),
        "do not start where tensor")
    bad("offsets_gap", st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}},
                               f32(1, 2, 3, 4, 5)), "tensor 'b': data_offsets [12, 20] do not start")
    bad("offsets_not_from_zero", st_file({"a": {"dtype": "F32", "shape": [2],
                                                "data_offsets": [4, 12]}}, f32(0, 1, 2)),
        "tensor 'a': data_offsets [4, 12]: the first tensor must start at offset 0")
    bad("offsets_not_to_end", st_file({"a": {"dtype": "F32", "shape": [2],
                                             "data_offsets": [0, 8]}}, f32(1, 2, 3, 4)),
        "the tensors end at offset 8 but the data section holds 16 bytes")
    h, d = tensors(("x", "F32", [2], f32(1, 2)))
    bad("trailing_garbage_after_data", st_file(h, d + b"GARBAGE!"),
        "the tensors end at offset 8 but the data section holds 16 bytes")
    bad("data_truncated", st_file(h, d[:5]), "pass the end of the 5-byte data section")
    bad("empty_header_with_data", st_file({}, b"\x00" * 8),
        "the tensors end at offset 0 but the data section holds 8 bytes")
    # ---- names and metadata
    bad("duplicate_names", st_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                   '"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
                                   f32(1, 2)), "tensor 'w': the name appears twice")
    bad("metadata_int_value", st_file({"__metadata__": {"epoch": 3}}),
        "__metadata__ value of \"epoch\" is not a string")
    bad("metadata_null_value", st_file({"__metadata__": {"k": None}}), "is not a string")
    bad("metadata_nested", st_file({"__metadata__": {"k": {"a": "b"}}}), "is not a string")
    bad("metadata_not_object", st_file({"__metadata__": "pt"}),
        "__metadata__ is not an object of strings")
    bad("metadata_list", st_file({"__metadata__": ["a", "b"]}), "__metadata__ is not an object")
    bad("metadata_twice", st_file('{"__metadata__":{"a":"b"},"__metadata__":{"c":"d"}}'),
        "__metadata__ appears twice")
    bad("metadata_duplicate_key", st_file('{"__metadata__":{"a":"b","a":"c"}}'),
        "__metadata__ key \"a\" appears twice", stricter=True)
    # ---- data Tessera refuses although the format allows it
    h, d = tensors(("mask", "BOOL", [3], bytes([1, 0, 7])))
    bad("bool_byte_not_0_or_1", st_file(h, d), "tensor 'mask': BOOL element 2 holds 7",
        stricter=True)
    # ---- valid safetensors that Tessera cannot hold
    for dt in ("F8_E4M3",):
        h, d = tensors(("q", dt, [2], bytes(2 * SIZES[dt])))
        case("unsupported_" + dt.lower(), st_file(h, d), "TS_ERR_UNSUPPORTED",
             "tensor 'q': dtype %s is not supported by Tessera" % dt, stricter=True)
    # ---- the narrower integer types Tessera holds since int8/int16/uint16/32/64 arrived
    for dt in ("I8", "I16", "U16"):
        h, d = tensors(("q", dt, [2], bytes(2 * SIZES[dt])))
        case("ok_" + dt.lower(), st_file(h, d), "TS_OK")
    h, d = tensors(("deep", "F32", [1] * 9, f32(1)))
    case("unsupported_9_dims", st_file(h, d), "TS_ERR_UNSUPPORTED",
         "tensor 'deep': 9 dims; Tessera tensors have at most 8", stricter=True)


def python_accepts(blob):
    import safetensors
    try:
        safetensors.deserialize(bytes(blob))
        return True
    except Exception:  # the Rust reader raises SafetensorError, and others for bad JSON
        return False


def main():
    build()
    os.makedirs(CORPUS, exist_ok=True)
    for f in os.listdir(CORPUS):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(CORPUS, f))
    try:
        import safetensors  # noqa: F401
        have_ref = True
    except ImportError:
        have_ref = False
        print("note: the Python safetensors package is not installed; no cross-check")
    disagree = []
    with open(TABLE, "w") as tab:
        tab.write("# file\texpected status\tmessage fragment (written by tools/gen_fuzz_corpus.py)\n")
        for name, blob, status, fragment, stricter in CASES:
            fname = name + ".safetensors"
            with open(os.path.join(CORPUS, fname), "wb") as f:
                f.write(blob)
            tab.write("%s\t%s\t%s\n" % (fname, status, fragment))
            if have_ref:
                py_ok = python_accepts(blob)
                want = status == "TS_OK" or stricter
                if py_ok != want:
                    disagree.append("%s: python %s, tessera %s" %
                                    (name, "accepts" if py_ok else "refuses", status))
    print("wrote %d files to %s" % (len(CASES), os.path.relpath(CORPUS, ROOT)))
    if disagree:
        print("disagreements with the Python reader:\n  " + "\n  ".join(disagree))
        return 1
    if have_ref:
        print("the Python safetensors reader agrees on every file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
