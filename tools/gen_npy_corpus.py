#!/usr/bin/env python3
"""gen_npy_corpus.py — writes the .npy fuzz corpus and the table of expected results.

Each case is a whole file built with struct (no third-party code), written to
tests/fuzz/corpus/npy/<name>.npy; tests/fuzz/corpus/npy.tsv lists, per file, the status Tessera
must return and a fragment of its message (tests/test_npy.c checks both, and the ctest
fuzz_npy_corpus replays the folder through the fuzz target).

When NumPy is installed, every file is also given to np.load as an independent reference: the
script fails if a file we accept (or refuse only as unsupported / too many dims) is refused by
NumPy, or one we call malformed is loaded by it, except for the cases marked `stricter` below,
where Tessera refuses on purpose what NumPy lets through (a key given twice, bytes after the data,
bool bytes other than 0/1, escapes in strings).

Usage: python3 tools/gen_npy_corpus.py   (from anywhere; rewrites the corpus)
"""
import os
import struct
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "npy")
TABLE = os.path.join(ROOT, "tests", "fuzz", "corpus", "npy.tsv")

MAGIC = b"\x93NUMPY"


def npy(header, data=b"", version=1, pad=True, length=None):
    """A file as np.save lays it out: magic, version, little-endian header length (2 bytes in
    1.0, 4 in 2.0 and 3.0), the header padded with spaces and '\\n' so that the data starts at a
    multiple of 64; header may be bytes (hand-made, unpadded when pad is False)."""
    raw = header if isinstance(header, bytes) else header.encode("latin-1")
    fmt = "<H" if version == 1 else "<I"
    pre = len(MAGIC) + 2 + struct.calcsize(fmt)
    if pad:
        raw += b" " * (64 - (pre + len(raw) + 1) % 64) + b"\n"  # 64 when already aligned
    n = len(raw) if length is None else length
    return MAGIC + bytes([version, 0]) + struct.pack(fmt, n) + raw + data


def dict_text(descr, shape, fortran=False):
    """np.save's dict: sorted keys, repr'd values, room for shape[0] to grow."""
    text = "{'descr': %r, 'fortran_order': %r, 'shape': %r, }" % (descr, fortran, tuple(shape))
    if shape:
        text += " " * (21 - len(repr(shape[-1 if fortran else 0])))
    return text


def pack(fmt, *v):
    return struct.pack(fmt % len(v), *v)


CASES = []  # (name, bytes, expected status, message fragment, stricter than NumPy)


def case(name, blob, status, fragment="", stricter=False):
    CASES.append((name, blob, status, fragment, stricter))


def ok(name, blob):
    case(name, blob, "TS_OK")


def bad(name, blob, fragment, stricter=False):
    case(name, blob, "TS_ERR_FORMAT", fragment, stricter)


def build():
    # ---- valid files, as np.save writes them and as other writers may
    ok("ok_f32_2x3", npy(dict_text("<f4", (2, 3)), pack("<%df", 0, 1, 2, 3, 4, 5)))
    ok("ok_f64_scalar", npy(dict_text("<f8", ()), pack("<%dd", 3.25)))
    ok("ok_f16_big_endian", npy(dict_text(">f2", (3,)), pack(">%dH", 0x3C00, 0xC000, 0x7C00)))
    ok("ok_i64_empty", npy(dict_text("<i8", (0, 3))))
    ok("ok_i32_fortran", npy(dict_text("<i4", (2, 3), True), pack("<%di", 1, 4, 2, 5, 3, 6)))
    ok("ok_i64_big_endian_fortran_3d",
       npy(dict_text(">i8", (2, 3, 2), True), pack(">%dq", *range(12))))
    ok("ok_fortran_empty_beside_2pow60",  # after fuzz_npy's find: no copy of an empty array
       npy(dict_text("<f4", (0, 0, 2 ** 60), True)))
    ok("ok_u8", npy(dict_text("|u1", (4,)), bytes([0, 1, 128, 255])))
    ok("ok_bool", npy(dict_text("|b1", (2, 2)), bytes([1, 0, 0, 1])))
    ok("ok_8_dims", npy(dict_text("<f4", (1, 2, 1, 2, 1, 1, 1, 2)), pack("<%df", *range(8))))
    ok("ok_version_2", npy(dict_text("<f4", (2,)), pack("<%df", 1, 2), version=2))
    ok("ok_version_3", npy(dict_text("<f4", (2,)), pack("<%df", 1, 2), version=3))
    ok("ok_double_quotes_any_order",
       npy('{"shape": (2,), "fortran_order": False, "descr": "<f4"}', pack("<%df", 1, 2)))
    ok("ok_unpadded_no_trailing_comma",
       npy("{'descr':'<i4','fortran_order':False,'shape':(2,)}", pack("<%di", 1, 2), pad=False))
    ok("ok_whitespace_and_newlines",
       npy(" \n{\n\t'descr' : '<f4' ,\r\n 'fortran_order' : False ,\n 'shape' : ( 1 , 2 , ) ,\n}",
           pack("<%df", 1, 2)))
    ok("ok_python2_long_dims", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
                                   pack("<%df", 1, 2)))
    ok("ok_native_order_spellings", npy(dict_text("=f8", (1,)), pack("<%dd", 1.5)))
    ok("ok_no_byte_order", npy(dict_text("f4", (1,)), pack("<%df", 1.5)))
    ok("ok_one_byte_big_endian", npy(dict_text(">u1", (2,)), bytes([7, 9])))
    # ---- the preamble
    bad("empty_file", b"", "0 bytes is too short for the magic string and format version")
    bad("short_magic", MAGIC[:4], "4 bytes is too short")
    bad("not_npy_zip", b"PK\x03\x04" + b"\x00" * 26, "not a .npy file")
    bad("bad_magic", b"\x93NUMPX\x01\x00\x00\x00", "does not start with \"\\x93NUMPY\"")
    bad("version_4_0", MAGIC + b"\x04\x00\x10\x00" + b" " * 16,
        "format version 4.0 is not supported")
    bad("version_1_1", MAGIC + b"\x01\x01\x10\x00" + b" " * 16, "format version 1.1")
    bad("short_preamble_v1", MAGIC + b"\x01\x00\x05", "9 bytes is too short for the 10-byte")
    bad("short_preamble_v2", MAGIC + b"\x02\x00\x05\x00", "10 bytes is too short for the 12-byte")
    bad("header_length_past_file", npy(dict_text("<f4", ()), pack("<%df", 1), length=4000),
        "header length 4000 is more than the")
    bad("header_length_2pow32_minus_1", npy("{}", version=3, pad=False, length=0xFFFFFFFF),
        "header length 4294967295 is more than the 2 bytes after it")
    bad("header_length_zero", npy("", pad=False), "expected '{', found the end of the header")
    # ---- the header's dict
    bad("header_not_dict", npy("['<f4', False, (1,)]", pack("<%df", 1)),
        "the header is not a Python dict")
    bad("header_unterminated", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ",
                                   pack("<%df", 1)), "found the end of the header")
    bad("missing_shape", npy("{'descr': '<f4', 'fortran_order': False}", pack("<%df", 1)),
        "the header has no 'shape' key")
    bad("unexpected_key", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 0}",
                              pack("<%df", 1)), "unexpected key 'x'")
    bad("duplicate_key", npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                             "'shape': ()}", pack("<%df", 1)),
        "key 'descr' appears twice", stricter=True)
    bad("missing_colon", npy("{'descr' '<f4', 'fortran_order': False, 'shape': ()}",
                             pack("<%df", 1)), "expected ':' after 'descr'")
    bad("missing_comma", npy("{'descr': '<f4' 'fortran_order': False, 'shape': ()}",
                             pack("<%df", 1)), "expected ',' or '}' after the value of 'descr'")
    bad("string_not_closed", npy("{'descr': '<f4\n, 'fortran_order': False, 'shape': ()}",
                                 pack("<%df", 1)), "is not closed")
    bad("string_escape", npy("{'descr': '<\\x664', 'fortran_order': False, 'shape': ()}",
                             pack("<%df", 1)), "escape sequences are not supported", stricter=True)
    bad("fortran_not_bool", npy("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
                                pack("<%df", 1)), "'fortran_order' is not True or False")
    bad("fortran_lowercase", npy("{'descr': '<f4', 'fortran_order': false, 'shape': ()}",
                                 pack("<%df", 1)), "'fortran_order' is not True or False")
    bad("descr_not_string", npy("{'descr': 4, 'fortran_order': False, 'shape': ()}",
                                pack("<%df", 1)), "expected the value of 'descr' as a quoted")
    bad("garbage_after_dict", npy(dict_text("<f4", ()) + " x", pack("<%df", 1)),
        "after the header's closing '}'")
    bad("indented_open_brace", npy("\n  " + dict_text("<f4", ()), pack("<%df", 1)),
        "the header's '{' is indented after a line break (byte 11)")
    ok("ok_blank_lines_after_dict",
       npy(dict_text("<f4", ()) + "\n\n  ", pack("<%df", 1), pad=False))
    bad("non_ascii_header", npy("{'descr': '<f4\xe9', 'fortran_order': False, 'shape': ()}",
                                pack("<%df", 1)), "header byte 0xe9 at byte 24 is not ASCII")
    bad("nul_in_header", npy("{'descr': '<f4',\0 'fortran_order': False, 'shape': ()}",
                             pack("<%df", 1)), "header holds control byte 0x00 at byte 26")
    # ---- the shape
    bad("shape_list", npy("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
                          pack("<%df", 1)), "the value of 'shape' is not a tuple")
    bad("shape_int_not_tuple", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
                                   pack("<%df", 1)), "'shape' (1) is an integer, not a tuple")
    bad("shape_negative", npy(dict_text("<f4", (2, -3)), pack("<%df", 1)),
        "'shape' element 1 is negative (-3)")
    bad("shape_float", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}",
                           pack("<%df", 1)), "'shape' element 0 is not an integer")
    bad("shape_leading_zero", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}",
                                  pack("<%df", 1)), "has a leading zero")
    bad("shape_long_suffix_v3", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1L,)}",
                                    pack("<%df", 1), version=3),
        "'shape' element 0 is not an integer (found 'L'")
    bad("shape_dim_past_int64", npy(dict_text("<f4", (2 ** 63,)), pack("<%df", 1)),
        "(9223372036854775808) is larger than 2^63 - 1")
    bad("shape_product_overflow", npy(dict_text("<f4", (2 ** 32, 2 ** 32)), pack("<%df", 1)),
        "shape (4294967296, 4294967296) holds more than 2^63 - 1 elements")
    bad("shape_overflow_beside_zero", npy(dict_text("<f4", (0, 2 ** 32, 2 ** 32))),
        "holds more than 2^63 - 1 elements")
    bad("shape_bytes_past_int64_beside_zero",  # found by fuzz_npy
        npy(dict_text("<f4", (0, 0, 2 ** 63 - 1), True)),
        "shape (0, 0, 9223372036854775807) of '<f4' needs more than 9223372036854775807 bytes")
    bad("shape_bytes_overflow", npy(dict_text("<f8", (2 ** 62,)), pack("<%dd", 1)),
        "of '<f8' needs more than")
    # ---- the data
    bad("data_truncated", npy(dict_text("<f4", (2, 3)), pack("<%df", 0, 1, 2, 3, 4)),
        "the data holds 20 bytes but shape (2, 3) of '<f4' needs 24 (the file is truncated)")
    bad("data_huge_claim", npy(dict_text("<f4", (10 ** 6, 10 ** 6)), pack("<%df", 1)),
        "needs 4000000000000 (the file is truncated)")
    bad("data_trailing_bytes", npy(dict_text("<f4", (1,)), pack("<%df", 1, 2)),
        "the data holds 8 bytes but shape (1,) of '<f4' needs 4 (bytes follow the data)",
        stricter=True)
    bad("bool_byte_2", npy(dict_text("|b1", (3,)), bytes([1, 0, 2])),
        "bool element 2 holds 2 (not 0 or 1)", stricter=True)
    # ---- descr
    bad("descr_unknown", npy(dict_text("<x9", ()), pack("<%df", 1)), "unknown descr '<x9'")
    bad("descr_bad_size", npy(dict_text("<f3", ()), b"\x00" * 3), "unknown descr '<f3'")
    bad("descr_empty", npy(dict_text("", ()), b""), "unknown descr ''")
    # ---- valid NumPy files Tessera does not hold
    case("ok_int16", npy(dict_text("<i2", (2,)), pack("<%dh", 1, 2)), "TS_OK")
    case("unsupported_complex64", npy(dict_text("<c8", (1,)), pack("<%df", 1, 2)),
         "TS_ERR_UNSUPPORTED", "dtype '<c8' is not supported")
    case("unsupported_bfloat16_void", npy(dict_text("|V2", (1,)), b"\x80\x3f"),
         "TS_ERR_UNSUPPORTED", "dtype '|V2' is not supported")
    case("unsupported_datetime", npy(dict_text("<M8[s]", (1,)), pack("<%dq", 0)),
         "TS_ERR_UNSUPPORTED", "dtype '<M8[s]' is not supported")
    case("unsupported_structured",
         npy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }",
             pack("<%df", 1) + pack("<%di", 2)),
         "TS_ERR_UNSUPPORTED", "is a structured dtype")
    case("too_many_dims", npy(dict_text("<f4", (1,) * 9), pack("<%df", 1)),
         "TS_ERR_SHAPE", "9 dims; Tessera tensors have at most 8")


def numpy_loads(np, blob):
    """Whether np.load (pickles refused, as by default) reads the file."""
    with tempfile.NamedTemporaryFile(suffix=".npy", delete=False) as f:
        f.write(blob)
        path = f.name
    try:
        np.load(path, allow_pickle=False)
        return True
    except Exception:  # NumPy raises ValueError, EOFError, OSError, SyntaxError...
        return False
    finally:
        os.unlink(path)


def main():
    build()
    os.makedirs(CORPUS, exist_ok=True)
    for f in os.listdir(CORPUS):
        if f.endswith(".npy"):
            os.remove(os.path.join(CORPUS, f))
    try:
        import numpy as np
    except ImportError:
        np = None
        print("note: NumPy is not installed; no cross-check")
    disagree = []
    with open(TABLE, "w") as tab:
        tab.write("# file\texpected status\tmessage fragment (written by tools/gen_npy_corpus.py)\n")
        for name, blob, status, fragment, stricter in CASES:
            fname = name + ".npy"
            with open(os.path.join(CORPUS, fname), "wb") as f:
                f.write(blob)
            tab.write("%s\t%s\t%s\n" % (fname, status, fragment))
            if np is not None:
                loaded = numpy_loads(np, blob)
                want = status != "TS_ERR_FORMAT" or stricter
                if loaded != want:
                    disagree.append("%s: NumPy %s, Tessera %s" %
                                    (name, "loads it" if loaded else "refuses it", status))
    print("wrote %d files to %s" % (len(CASES), os.path.relpath(CORPUS, ROOT)))
    if disagree:
        print("disagreements with NumPy:\n  " + "\n  ".join(disagree))
        return 1
    if np is not None:
        print("NumPy %s agrees on every file" % np.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
