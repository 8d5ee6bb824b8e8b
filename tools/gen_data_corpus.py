#!/usr/bin/env python3
"""gen_data_corpus.py — writes the fuzz corpora of the dataset readers and their tables of results.

tests/fuzz/corpus/idx/    IDX files, plain and gzip (images u8 N x H x W, labels u8 N)
tests/fuzz/corpus/cifar/  CIFAR-10 binary batches (3,073-byte records)
tests/fuzz/corpus/csv/    CSV files, each read with every option set of tests/fuzz/data_probe.h

Each case is built here with struct/gzip/zlib only. <kind>.tsv lists, per file (and per option set
for CSV), the status Tessera must return and a fragment of its message; tests/test_data_corpus.c
checks both, from memory and from the file, and the fuzz targets start from these files.

Usage: python3 tools/gen_data_corpus.py   (from anywhere; rewrites the three corpora)
"""
import gzip
import os
import shutil
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def images(n, h, w):
    return bytes((i * 37 + k) % 256 for i in range(n) for k in range(h * w))


IMG = idx(0x803, [3, 2, 4], images(3, 2, 4))
LAB = idx(0x801, [3], bytes([7, 0, 3]))
NAMED = "header says 3 x 2 x 4 = 24 bytes but the file holds"


def gz_corrupt_crc(data):
    b = bytearray(gz(data))
    b[-8] ^= 0xFF  # the CRC-32 of the trailer
    return bytes(b)


def gz_corrupt_block(data):
    b = bytearray(gz(data))
    b[10] = 0xFF  # first deflate block header: reserved block type 3
    return bytes(b)


def raw_deflate_bomb(n):
    """A gzip stream whose header says n x 1024 x 1024 images but that inflates to 1 MiB + header."""
    return gz(idx(0x803, [n, 1024, 1024], bytes(1024 * 1024)))


IDX_CASES = [
    # name, bytes, status, fragment
    ("ok_images.idx3", IMG, "TS_OK", ""),
    ("ok_labels.idx1", LAB, "TS_OK", ""),
    ("ok_images.idx3.gz", gz(IMG), "TS_OK", ""),
    ("ok_labels.idx1.gz", gz(LAB), "TS_OK", ""),
    ("ok_no_images.idx3", idx(0x803, [0, 28, 28], b""), "TS_OK", ""),
    ("ok_two_members.gz", gz(IMG[:10]) + gz(IMG[10:]), "TS_OK", ""),
    ("ok_trailing_garbage.gz", gz(LAB) + b"garbage", "TS_OK", ""),
    ("ok_labels_all_classes.idx1", idx(0x801, [10], bytes(range(10))), "TS_OK", ""),
    ("empty", b"", "TS_ERR_FORMAT", "0 bytes is too short for an IDX file"),
    ("trunc_magic", IMG[:3], "TS_ERR_FORMAT", "3 bytes is too short for an IDX file"),
    ("trunc_header", IMG[:10], "TS_ERR_FORMAT",
     "the header ends after 10 bytes (a 3-dim IDX header has 16)"),
    ("trunc_payload", IMG[:-4], "TS_ERR_FORMAT", NAMED + " 20 (after its 16-byte header)"),
    ("trunc_payload.gz", gz(IMG[:-4]), "TS_ERR_FORMAT",
     NAMED + " 20 (decompressed, after its 16-byte header)"),
    ("long_payload", IMG + b"\0", "TS_ERR_FORMAT", NAMED + " 25 (after its 16-byte header)"),
    ("long_payload.gz", gz(IMG + b"\0"), "TS_ERR_FORMAT", NAMED + " more (decompressed"),
    ("trunc_labels.gz", gz(idx(0x801, [100], bytes(50))), "TS_ERR_FORMAT",
     "header says 100 labels = 100 bytes but the file holds 50 (decompressed"),
    ("wrong_magic", idx(0x12345678, [], IMG[4:]), "TS_ERR_FORMAT",
     "not an IDX file: magic number 0x12345678"),
    ("wrong_magic_0dims", idx(0x800, [], IMG[4:]), "TS_ERR_FORMAT",
     "not an IDX file: magic number 0x00000800"),
    ("wrong_magic_type", idx(0x0A03, [3, 2, 4], images(3, 2, 4)), "TS_ERR_FORMAT",
     "not an IDX file: magic number 0x00000A03"),
    ("type_float", idx(0x0D03, [1, 1, 1], b"\0\0\0\0"), "TS_ERR_UNSUPPORTED",
     "IDX element type 0x0D (float) is not supported"),
    ("dims_2", idx(0x802, [3, 8], images(3, 2, 4)), "TS_ERR_UNSUPPORTED",
     "IDX files with 2 dims are not supported"),
    ("huge_dims_overflow", idx(0x803, [0xFFFFFFFF] * 3, b"\0" * 8), "TS_ERR_FORMAT",
     "header says 4294967295 x 4294967295 x 4294967295 bytes, which overflows"),
    ("huge_dims_overflow.gz", gz(idx(0x803, [0xFFFFFFFF] * 3, b"\0" * 8)), "TS_ERR_FORMAT",
     "which overflows"),
    ("huge_dims_mnist", idx(0x803, [60000, 28, 28], images(1, 28, 28)), "TS_ERR_FORMAT",
     "header says 60000 x 28 x 28 = 47040000 bytes but the file holds 784"),
    ("huge_dims.gz", gz(idx(0x803, [0xFFFFFFFF, 1, 1], b"\0" * 24)), "TS_ERR_FORMAT",
     "header says 4294967295 x 1 x 1 = 4294967295 bytes but the file holds 24 (decompressed"),
    ("huge_dims_bomb.gz", raw_deflate_bomb(4000), "TS_ERR_FORMAT",
     "header says 4000 x 1024 x 1024 = 4194304000 bytes but the file holds 1048576 (decompressed"),
    ("zero_width", idx(0x803, [5, 28, 0], b""), "TS_ERR_FORMAT",
     "header says images of 28 x 0 pixels"),
    ("labels_out_of_range", idx(0x801, [12], bytes(range(12))), "TS_ERR_FORMAT",
     "label 10 at index 10 is out of range for 10 classes"),
    ("labels_255.gz", gz(idx(0x801, [2], b"\x01\xff")), "TS_ERR_FORMAT",
     "label 255 at index 1 is out of range for 10 classes"),
    ("bad_gzip_crc.gz", gz_corrupt_crc(IMG), "TS_ERR_FORMAT", "bad gzip data (incorrect data check)"),
    ("bad_gzip_length.gz", gz(IMG)[:-4] + b"\0\0\0\0", "TS_ERR_FORMAT",
     "bad gzip data (incorrect length check)"),
    ("bad_gzip_block.gz", gz_corrupt_block(IMG), "TS_ERR_FORMAT", "bad gzip data (invalid block type)"),
    ("bad_gzip_method.gz", b"\x1f\x8b\x09" + gz(IMG)[3:], "TS_ERR_FORMAT",
     "bad gzip data (unknown compression method)"),
    ("gzip_truncated_end.gz", gz(IMG)[:-3], "TS_ERR_FORMAT",
     "the gzip stream is truncated (its end and checksum are missing)"),
    ("gzip_truncated_header.gz", gz(IMG)[:12], "TS_ERR_FORMAT", "the gzip stream is truncated"),
    ("gzip_magic_only.gz", b"\x1f\x8b", "TS_ERR_FORMAT", "the gzip stream is truncated"),
]


def record(label, seed):
    return bytes([label]) + bytes((seed * 13 + k * 7 + k // 1024 * 50) % 256 for k in range(3072))


CIFAR_CASES = [
    ("ok_one.bin", record(3, 1), "TS_OK", ""),
    ("ok_three.bin", record(0, 1) + record(9, 2) + record(5, 3), "TS_OK", ""),
    ("empty.bin", b"", "TS_ERR_FORMAT", "empty file (a CIFAR-10 batch holds 3073-byte records)"),
    ("trunc_record.bin", record(1, 1)[:3072], "TS_ERR_FORMAT",
     "3072 bytes is not a whole number of 3073-byte records (0 records and 3072 bytes over)"),
    ("extra_byte.bin", record(1, 1) + b"\0", "TS_ERR_FORMAT",
     "3074 bytes is not a whole number of 3073-byte records (1 record and 1 byte over)"),
    ("trunc_second.bin", record(1, 1) + record(2, 2)[:100], "TS_ERR_FORMAT",
     "(1 record and 100 bytes over)"),
    ("label_10.bin", record(1, 1) + record(10, 2), "TS_ERR_FORMAT",
     "record 1 has label 10 (CIFAR-10 labels are 0..9)"),
    ("label_255.bin", record(255, 1), "TS_ERR_FORMAT", "record 0 has label 255"),
    ("one_byte.bin", b"\x05", "TS_ERR_FORMAT", "1 byte is not a whole number"),
]

# CSV: (name, text, [(option set, status, fragment)]); the option sets are those of data_probe.h:
# last, first-noheader-regression, name-label, col1-semicolon, col5.
CSV_CASES = [
    ("ok_header.csv", b"a,b,label\n0.5,1.25,2\n-3,4e2,0\n7,8,1\n",
     [("last", "TS_OK", ""), ("name-label", "TS_OK", ""),
      ("first-noheader-regression", "TS_ERR_FORMAT", ":1: column 1: 'a' is not a number"),
      ("col5", "TS_ERR_ARG", "target column 5 is out of range for 3 columns"),
      ("col1-semicolon", "TS_ERR_FORMAT",
       ":1: 1 column: a sample needs at least 2 (features and a target)")]),
    ("ok_no_header.csv", b"1.5,2,3\n4,5,6\n",
     [("last", "TS_OK", ""), ("first-noheader-regression", "TS_OK", ""),
      ("name-label", "TS_ERR_ARG",
       "target column 'label' asked by name but the file has no header line")]),
    ("ok_semicolon.csv", b"x;label;z\n1;2;3\n4;0;6\n", [("col1-semicolon", "TS_OK", "")]),
    ("ok_crlf_bom_quotes.csv", b"\xef\xbb\xbf\"f 1\",\"label\"\r\n\"1.5\", 2\r\n\r\n3,4\r\n",
     [("last", "TS_OK", ""), ("name-label", "TS_OK", "")]),
    ("ok_nan_feature.csv", b"a,label\nnan,1\ninf,0\n", [("last", "TS_OK", "")]),
    ("empty.csv", b"", [("last", "TS_ERR_FORMAT", "no data rows (empty file)"),
                        ("name-label", "TS_ERR_FORMAT", "no data rows (empty file)")]),
    ("blank_lines_only.csv", b"\n \r\n\t\n", [("last", "TS_ERR_FORMAT", "no data rows (empty file)")]),
    ("header_only.csv", b"a,b,label\n", [("last", "TS_ERR_FORMAT", "no data rows after the header")]),
    ("one_column.csv", b"label\n1\n2\n", [("last", "TS_ERR_FORMAT", ":1: 1 column")]),
    ("ragged_short.csv", b"a,b,label\n1,2,3\n4,5\n",
     [("last", "TS_ERR_FORMAT", ":3: 2 columns where the first line has 3")]),
    ("ragged_long.csv", b"1,2,3\n4,5,6,7\n",
     [("last", "TS_ERR_FORMAT", ":2: 4 columns where the first line has 3")]),
    ("non_numeric.csv", b"a,b,label\n1,2,3\n4,abc,6\n",
     [("last", "TS_ERR_FORMAT", ":3: column 2: 'abc' is not a number")]),
    ("non_numeric_target.csv", b"a,label\n1,cat\n", [("last", "TS_ERR_FORMAT",
                                                       ":2: column 2: 'cat' is not a number")]),
    ("empty_cell.csv", b"a,b,label\n1,,3\n", [("last", "TS_ERR_FORMAT", ":2: column 2 is empty")]),
    ("bad_target_name.csv", b"a,b,c\n1,2,3\n",
     [("name-label", "TS_ERR_ARG", "no column named 'label' in the header (3 columns)")]),
    ("class_fraction.csv", b"a,label\n1,1.5\n",
     [("last", "TS_ERR_FORMAT", ":2: column 2: class '1.5' is not a non-negative integer"),
      ("first-noheader-regression", "TS_ERR_FORMAT", ":1: column 1: 'a' is not a number")]),
    ("class_negative.csv", b"1,-2\n", [("last", "TS_ERR_FORMAT", "class '-2' is not a non-negative"),
                                      ("first-noheader-regression", "TS_OK", "")]),
    ("class_huge.csv", b"1,1e12\n", [("last", "TS_ERR_FORMAT", "class '1e12' is too large")]),
    ("unterminated_quote.csv", b"\"a,b\n1,2\n",
     [("last", "TS_ERR_FORMAT", ":1: column 1: unterminated quote")]),
    ("text_after_quote.csv", b"\"a\"b,c\n1,2\n",
     [("last", "TS_ERR_FORMAT", ":1: column 1: text after the closing quote")]),
    ("long_cell.csv", b"a,label\n" + b"1" * 600 + b",0\n",
     [("last", "TS_ERR_FORMAT", ":2: column 1: '1111111111111111111111111111111111111111...' is "
                                "not a number")]),
    ("nul_byte.csv", b"a,label\n1\x002,0\n", [("last", "TS_ERR_FORMAT", "column 1: '1?2' is not a number")]),
    ("binary.csv", bytes(range(256)), [("last", "TS_ERR_FORMAT", "")]),
]


def write_kind(kind, cases, with_opts):
    folder = os.path.join(CORPUS, kind)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    lines = ["# file\t%sexpected status\tmessage fragment (written by tools/gen_data_corpus.py)"
             % ("option set\t" if with_opts else "")]
    for case in cases:
        name, data = case[0], case[1]
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        if with_opts:
            lines += ["%s\t%s\t%s\t%s" % (name, o, st, frag) for o, st, frag in case[2]]
        else:
            lines.append("%s\t%s\t%s" % (name, case[2], case[3]))
    with open(os.path.join(CORPUS, kind + ".tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d files" % (kind, len(cases)))


def main():
    assert len(zlib.decompress(raw_deflate_bomb(4000), 31)) == 16 + 1024 * 1024
    write_kind("idx", IDX_CASES, False)
    write_kind("cifar", CIFAR_CASES, False)
    write_kind("csv", CSV_CASES, True)


if __name__ == "__main__":
    main()
