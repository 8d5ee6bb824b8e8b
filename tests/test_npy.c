/* test_npy.c — NumPy .npy files: round trips of every dtype, shapes and devices, np.save's exact
 * bytes, files built byte by byte (big-endian, Fortran order, versions 2.0 and 3.0, header
 * spellings NumPy reads), every malformed case with its code and message, the fuzz corpus's table
 * (tools/gen_npy_corpus.py), and an allocation-failure sweep over save and load. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_sweep.h"
#include "ts_test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

/* ------------------------------------------------------------------ byte helpers */
typedef struct blob {
    unsigned char *p;
    size_t n;
} blob;

static void put(blob *b, const void *data, size_t n) {
    b->p = realloc(b->p, b->n + n + 1);
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}
static void put_str(blob *b, const char *s) { put(b, s, strlen(s)); }

/* A .npy file built by hand: magic, version major.0, the header length (2 bytes for 1.0, 4 for
 * 2.0 and 3.0, little-endian), the dict text, then (pad) spaces and '\n' to a multiple of 64 as
 * np.save does, then the data. */
static blob npy_file(int major, const char *dict, bool pad, const void *data, size_t ndata) {
    blob b = {0};
    size_t len_bytes = major == 1 ? 2 : 4, pre = 8 + len_bytes, n = strlen(dict);
    size_t hlen = n;
    if (pad) hlen = n + 1 + 64 - (pre + n + 1) % 64; /* NumPy pads 64 when already aligned */
    unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
    for (size_t i = 0; i < len_bytes; i++) head[8 + i] = (unsigned char)(hlen >> (8 * i));
    put(&b, head, pre);
    put(&b, dict, n);
    for (size_t i = n; pad && i + 1 < hlen; i++) put_str(&b, " ");
    if (pad) put_str(&b, "\n");
    put(&b, data, ndata);
    return b;
}

static bool write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static blob read_file(const char *path) {
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    unsigned char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) put(&b, buf, k);
    fclose(f);
    return b;
}

/* The tensor's bytes (contiguous, host) equal want's. */
static bool same_bytes(ts_tensor *t, const void *want, size_t n) {
    if (!t || ts_nbytes(t) != n) return false;
    unsigned char *got = malloc(n + 1);
    bool ok = ts_copy_to_host(t, got, n) == TS_OK && (n == 0 || memcmp(got, want, n) == 0);
    free(got);
    return ok;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

/* ts_npy_parse refuses b with code and a message "<memory>: ...fragment..." (b is freed). */
#define PARSE_FAILS(b, code, fragment)                                                             \
    do {                                                                                           \
        blob pb_ = (b);                                                                            \
        ts_tensor *pt_ = ts_npy_parse(pb_.p, pb_.n, ts_cpu());                                     \
        CHECK(pt_ == NULL);                                                                        \
        ts_release(pt_);                                                                           \
        CHECK(strncmp(ts_error_message(), "<memory>: ", 10) == 0);                                 \
        CHECK_ERR_HAS(code, fragment);                                                             \
        free(pb_.p);                                                                               \
    } while (0)

/* ------------------------------------------------------------------ round trips */
static void test_round_trip_dtypes(void) {
    static const float f32[6] = {0, 1.5f, -2.25f, 3e30f, -0.0f, 7};
    static const double f64[6] = {0, 1e-300, -2.5, 1e300, 3.25, -7};
    static const uint16_t f16[6] = {0x0000, 0x3c00, 0xc000, 0x7bff, 0x8000, 0x7c00};
    static const int64_t i64[6] = {0, -1, INT64_MAX, INT64_MIN, 42, 1LL << 40};
    static const int32_t i32[6] = {0, -1, INT32_MAX, INT32_MIN, 42, 1 << 20};
    static const uint8_t u8[6] = {0, 1, 127, 128, 255, 9};
    static const uint8_t b1[6] = {1, 0, 0, 1, 1, 0};
    struct {
        ts_dtype dt;
        const void *data;
        const char *descr;
    } cases[] = {
        {TS_F32, f32, "'<f4'"}, {TS_F64, f64, "'<f8'"}, {TS_F16, f16, "'<f2'"},
        {TS_I64, i64, "'<i8'"}, {TS_I32, i32, "'<i4'"}, {TS_U8, u8, "'|u1'"},
        {TS_BOOL, b1, "'|b1'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_scope_begin();
        ts_tensor *t = ts_from_data(TS_SHAPE(2, 3), cases[i].dt, cases[i].data, (ts_opts){0});
        const char *path = tmp_path("rt.npy");
        CHECK(ts_npy_save(path, t) == TS_OK);
        ts_tensor *back = ts_npy_load(path, ts_cpu());
        CHECK_OK();
        CHECK(back && ts_dtype_of(back) == cases[i].dt);
        CHECK(shape_is(back, TS_SHAPE(2, 3)));
        CHECK(same_bytes(back, cases[i].data, 6 * ts_dtype_size(cases[i].dt)));
        blob f = read_file(path);
        CHECK(f.n == 128 + 6 * ts_dtype_size(cases[i].dt));
        if (f.p) f.p[f.n - 1 - 6 * ts_dtype_size(cases[i].dt)] = '\0';
        CHECK(f.p && strstr((char *)f.p + 10, cases[i].descr));
        free(f.p);
        ts_scope_end();
    }
}

/* 0-dim, empty, 1-dim and 8-dim shapes; >8 dims is TS_ERR_SHAPE naming the file. */
static void test_shapes(void) {
    ts_scope_begin();
    ts_shape shapes[] = {TS_SHAPE(),     TS_SHAPE(0), TS_SHAPE(2, 0),
                         TS_SHAPE(0, 3), TS_SHAPE(5), TS_SHAPE(1, 2, 1, 2, 1, 2, 1, 3),
                         TS_SHAPE(1, 1)};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t numel = 1;
        for (int k = 0; k < shapes[i].ndim; k++) numel *= shapes[i].dims[k];
        ts_tensor *t =
            ts_reshape(ts_arange(0, (double)numel, 1, (ts_opts){.dtype = TS_I32}), shapes[i]);
        const char *path = tmp_path("shape.npy");
        CHECK(ts_npy_save(path, t) == TS_OK);
        ts_tensor *back = ts_npy_load(path, ts_cpu());
        CHECK_OK();
        CHECK(shape_is(back, shapes[i]));
        int32_t want[48];
        for (int k = 0; k < 48; k++) want[k] = k;
        CHECK(same_bytes(back, want, (size_t)ts_numel(t) * 4));
    }
    /* a 0-dim int64 is np.save's bytes exactly: no growth padding without a first dim */
    ts_tensor *s = ts_from_data(TS_SHAPE(), TS_I64, (int64_t[]){-3}, (ts_opts){0});
    CHECK(ts_npy_save(tmp_path("scalar.npy"), s) == TS_OK);
    blob f = read_file(tmp_path("scalar.npy"));
    blob want = npy_file(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", true,
                         (int64_t[]){-3}, 8);
    CHECK(f.n == 136 && want.n == 136 && memcmp(f.p, want.p, 136) == 0);
    free(f.p);
    free(want.p);

    /* 9 dims: valid NumPy, more than Tessera holds */
    blob nine = npy_file(1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, "
                         "1, 2), }",
                         true, (float[]){1, 2}, 8);
    CHECK(write_file(tmp_path("nine.npy"), nine.p, nine.n));
    CHECK(ts_npy_load(tmp_path("nine.npy"), ts_cpu()) == NULL);
    CHECK(strstr(ts_error_message(), tmp_path("nine.npy")) != NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "9 dims; Tessera tensors have at most 8");
    PARSE_FAILS(nine, TS_ERR_SHAPE, "9 dims");
    ts_scope_end();
}

/* np.save's bytes for float32 [[0, 1, 2], [3, 4, 5]], from the format's documentation: magic,
 * version 1.0, header length 118 (little-endian uint16), the dict with sorted keys, 20 spaces of
 * room for shape[0] to grow (21 - len("2"), np.save since NumPy 1.24), then spaces and '\n' so
 * that magic + length + header is 128 bytes, a multiple of 64; then the data, little-endian. */
static void test_exact_bytes(void) {
    ts_scope_begin();
    float v[6] = {0, 1, 2, 3, 4, 5};
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(2, 3), v, (ts_opts){0});
    CHECK(ts_npy_save(tmp_path("exact.npy"), t) == TS_OK);
    unsigned char want[128 + 24];
    memcpy(want, "\x93NUMPY\x01\x00", 8);
    want[8] = 118;
    want[9] = 0;
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    memcpy(want + 10, dict, strlen(dict));
    memset(want + 10 + strlen(dict), ' ', 128 - 10 - strlen(dict) - 1);
    want[127] = '\n';
    memcpy(want + 128, v, 24);
    blob f = read_file(tmp_path("exact.npy"));
    CHECK_EQ(f.n, sizeof want);
    bool same = f.n == sizeof want && memcmp(f.p, want, sizeof want) == 0;
    CHECK(same);
    if (!same && f.p) fprintf(stderr, "  got header: %.*s\n", (int)(f.n > 128 ? 118 : 0), f.p + 10);
    free(f.p);
    ts_scope_end();
}

/* Non-contiguous input is saved as its logical C-order content; a sim tensor saves and loads. */
static void test_layouts_and_devices(void) {
    ts_scope_begin();
    ts_tensor *a = ts_reshape(ts_arange(0, 12, 1, (ts_opts){.dtype = TS_F32}), TS_SHAPE(3, 4));
    ts_tensor *tr = ts_transpose(a, 0, 1); /* [4, 3] */
    CHECK(!ts_is_contiguous(tr));
    CHECK(ts_npy_save(tmp_path("tr.npy"), tr) == TS_OK);
    ts_tensor *back = ts_npy_load(tmp_path("tr.npy"), ts_cpu());
    float want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = (float)(j * 4 + i);
    CHECK(shape_is(back, TS_SHAPE(4, 3)) && same_bytes(back, want, sizeof want));
    ts_tensor *sl = ts_slice(a, 1, 1, 4, 2); /* columns 1 and 3 */
    CHECK(ts_npy_save(tmp_path("sl.npy"), sl) == TS_OK);
    back = ts_npy_load(tmp_path("sl.npy"), ts_cpu());
    CHECK(shape_is(back, TS_SHAPE(3, 2)) && same_bytes(back, (float[]){1, 3, 5, 7, 9, 11}, 24));

    /* sim:0: saved from the device (strided), loaded onto it and onto the cpu */
    ts_tensor *d = ts_to(tr, ts_sim(0));
    CHECK_OK();
    CHECK(ts_npy_save(tmp_path("sim.npy"), d) == TS_OK);
    ts_tensor *on_sim = ts_npy_load(tmp_path("sim.npy"), ts_sim(0));
    CHECK(on_sim && ts_device_equal(ts_device_of(on_sim), ts_sim(0)));
    CHECK(same_bytes(on_sim, want, sizeof want));
    ts_tensor *on_cpu = ts_npy_load(tmp_path("sim.npy"), ts_cpu());
    CHECK(on_cpu && ts_device_equal(ts_device_of(on_cpu), ts_cpu()));
    CHECK(same_bytes(on_cpu, want, sizeof want));
    blob f1 = read_file(tmp_path("tr.npy")), f2 = read_file(tmp_path("sim.npy"));
    CHECK(f1.n == f2.n && f1.n > 0 && memcmp(f1.p, f2.p, f1.n) == 0);
    free(f1.p);
    free(f2.p);
    /* the default device (pushed) is where a TS_DEVICE_DEFAULT load lands */
    ts_device_push(ts_sim(1));
    ts_tensor *dflt = ts_npy_load(tmp_path("sim.npy"), (ts_device){0});
    ts_device_pop();
    CHECK(dflt && ts_device_equal(ts_device_of(dflt), ts_sim(1)));
    /* an absent device */
    CHECK(ts_npy_load(tmp_path("sim.npy"), ts_sim(40)) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ files NumPy may write */
static void be_bytes(unsigned char *out, const void *v, size_t n, size_t size) {
    const unsigned char *s = v;
    for (size_t i = 0; i < n; i += size)
        for (size_t k = 0; k < size; k++) out[i + k] = s[i + size - 1 - k];
}

static void test_big_endian(void) {
    ts_scope_begin();
    static const float f32[3] = {1.5f, -2, 1e-20f};
    static const double f64[3] = {1.5, -2, 1e-300};
    static const uint16_t f16[3] = {0x3c00, 0xc000, 0x0001};
    static const int64_t i64[3] = {1, -2, 0x0102030405060708LL};
    static const int32_t i32[3] = {1, -2, 0x01020304};
    static const uint8_t u8[3] = {1, 2, 255};
    struct {
        const char *descr;
        ts_dtype dt;
        const void *v;
        size_t size;
    } cases[] = {{">f4", TS_F32, f32, 4}, {">f8", TS_F64, f64, 8}, {">f2", TS_F16, f16, 2},
                 {">i8", TS_I64, i64, 8}, {">i4", TS_I32, i32, 4}, {">u1", TS_U8, u8, 1},
                 {"=i4", TS_I32, i32, 4}, {"|f8", TS_F64, f64, 8}, {"<f2", TS_F16, f16, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char data[24];
        if (cases[i].descr[0] == '>')
            be_bytes(data, cases[i].v, 3 * cases[i].size, cases[i].size);
        else
            memcpy(data, cases[i].v, 3 * cases[i].size);
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }",
                 cases[i].descr);
        blob b = npy_file(1, dict, true, data, 3 * cases[i].size);
        for (int dev = 0; dev < 2; dev++) {
            ts_tensor *t = ts_npy_parse(b.p, b.n, dev ? ts_sim(0) : ts_cpu());
            CHECK_OK();
            CHECK(t && ts_dtype_of(t) == cases[i].dt && shape_is(t, TS_SHAPE(3)));
            bool ok = same_bytes(t, cases[i].v, 3 * cases[i].size);
            CHECK(ok);
            if (!ok) fprintf(stderr, "  descr %s on %s\n", cases[i].descr, dev ? "sim:0" : "cpu");
        }
        free(b.p);
    }
    ts_scope_end();
}

/* Fortran order: column-major bytes become a row-major tensor. */
static void test_fortran_order(void) {
    ts_scope_begin();
    /* [[1, 2, 3], [4, 5, 6]] column by column */
    blob b = npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", true,
                      (float[]){1, 4, 2, 5, 3, 6}, 24);
    for (int dev = 0; dev < 2; dev++) {
        ts_tensor *t = ts_npy_parse(b.p, b.n, dev ? ts_sim(0) : ts_cpu());
        CHECK_OK();
        CHECK(t && ts_is_contiguous(t) && shape_is(t, TS_SHAPE(2, 3)));
        CHECK(same_bytes(t, (float[]){1, 2, 3, 4, 5, 6}, 24));
    }
    free(b.p);
    /* 3 dims, big-endian int64 on sim:0: element [i][j][k] = 100i + 10j + k sits at
     * i + 2j + 6k in the file */
    int64_t col[2 * 3 * 4], row[2 * 3 * 4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                col[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
                row[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
            }
    unsigned char be[sizeof col];
    be_bytes(be, col, sizeof col, 8);
    b = npy_file(1, "{'descr': '>i8', 'fortran_order': True, 'shape': (2, 3, 4), }", true, be,
                 sizeof be);
    ts_tensor *t = ts_npy_parse(b.p, b.n, ts_sim(0));
    CHECK(shape_is(t, TS_SHAPE(2, 3, 4)) && same_bytes(t, row, sizeof row));
    free(b.p);
    /* 1-dim, 0-dim and empty: Fortran order changes nothing */
    b = npy_file(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", true,
                 (int32_t[]){7, 8, 9}, 12);
    t = ts_npy_parse(b.p, b.n, ts_cpu());
    CHECK(shape_is(t, TS_SHAPE(3)) && same_bytes(t, (int32_t[]){7, 8, 9}, 12));
    free(b.p);
    b = npy_file(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (), }", true, (int32_t[]){7},
                 4);
    t = ts_npy_parse(b.p, b.n, ts_cpu());
    CHECK(shape_is(t, TS_SHAPE()) && same_bytes(t, (int32_t[]){7}, 4));
    free(b.p);
    b = npy_file(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (0, 5), }", true, NULL, 0);
    t = ts_npy_parse(b.p, b.n, ts_sim(0));
    CHECK(shape_is(t, TS_SHAPE(0, 5)));
    free(b.p);
    /* empty beside a dim of 2^60 (found by the fuzzer: no kernel may walk such a shape) */
    b = npy_file(1,
                 "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 0, 1152921504606846976), }",
                 true, NULL, 0);
    t = ts_npy_parse(b.p, b.n, ts_sim(0));
    CHECK(shape_is(t, TS_SHAPE(0, 0, (int64_t)1 << 60)) && ts_is_contiguous(t));
    free(b.p);
    CHECK_OK();
    ts_scope_end();
}

/* Versions 2.0 and 3.0 and the spellings of the dict that NumPy's reader (ast.literal_eval) takes.
 */
static void test_header_variants(void) {
    ts_scope_begin();
    const float v[2] = {1, 2};
    struct {
        int major;
        const char *dict;
        bool pad;
    } ok[] = {
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", true},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", true},
        {1, "{\"shape\": (2,), \"descr\": \"<f4\", \"fortran_order\": False}", true},
        {1, "{'fortran_order':False,'shape':(2,),'descr':'<f4'}", false},
        {1, "  {\n 'descr' : '<f4' ,\n\t'fortran_order' : False ,\r\n 'shape' : ( 2 , ) ,\n}\n\n",
         false},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", true}, /* Python 2 */
        {2, "{'descr': 'f4', 'fortran_order': False, 'shape': (+2,), }", true},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, ), }", true},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        blob b = npy_file(ok[i].major, ok[i].dict, ok[i].pad, v, 8);
        ts_tensor *t = ts_npy_parse(b.p, b.n, ts_cpu());
        bool good = t && same_bytes(t, v, 8) && ts_numel(t) == 2;
        CHECK(good);
        if (!good) fprintf(stderr, "  refused: %s (%s)\n", ok[i].dict, ts_error_message());
        ts_error_clear();
        free(b.p);
    }
    /* a 2.0 header as np.save(..., version=(2, 0)) writes it: 4-byte length, 64-byte aligned */
    blob b = npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", true, v, 8);
    CHECK(b.n == 128 + 8 && b.p[8] == 116 && b.p[9] == 0 && b.p[10] == 0 && b.p[11] == 0);
    free(b.p);
    /* a long header (a 3.0 file padded far past 64 KiB still reads) */
    char *dict = malloc(70000);
    snprintf(dict, 70000, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
    size_t n = strlen(dict);
    memset(dict + n, ' ', 69990 - n);
    dict[69990] = '\0';
    b = npy_file(3, dict, true, v, 8);
    ts_tensor *t = ts_npy_parse(b.p, b.n, ts_cpu());
    CHECK(t && same_bytes(t, v, 8));
    free(b.p);
    free(dict);
    ts_scope_end();
}

/* ------------------------------------------------------------------ malformed files */
static blob raw(const void *p, size_t n) {
    blob b = {0};
    put(&b, p, n);
    return b;
}
static blob hdr(const char *dict, const void *data, size_t n) {
    return npy_file(1, dict, true, data, n);
}

static void test_malformed(void) {
    const float v6[6] = {0};
    /* preamble */
    PARSE_FAILS(raw("", 0), TS_ERR_FORMAT, "0 bytes is too short for the magic string");
    PARSE_FAILS(raw("\x93NUM", 4), TS_ERR_FORMAT, "4 bytes is too short");
    PARSE_FAILS(raw("\x93NUMPX\x01\x00\x00\x00", 10), TS_ERR_FORMAT,
                "not a .npy file: it does not start with \"\\x93NUMPY\"");
    PARSE_FAILS(raw("PK\x03\x04", 4), TS_ERR_FORMAT, "not a .npy file");
    PARSE_FAILS(raw("\x93NUMPY\x04\x00\x00\x00", 10), TS_ERR_FORMAT,
                "format version 4.0 is not supported (1.0, 2.0 and 3.0 are)");
    PARSE_FAILS(raw("\x93NUMPY\x01\x01\x00\x00", 10), TS_ERR_FORMAT, "format version 1.1");
    PARSE_FAILS(raw("\x93NUMPY\x00\x00\x00\x00", 10), TS_ERR_FORMAT, "format version 0.0");
    PARSE_FAILS(raw("\x93NUMPY\x01\x00\x05", 9), TS_ERR_FORMAT,
                "9 bytes is too short for the 10-byte preamble of a version 1.0 file");
    PARSE_FAILS(raw("\x93NUMPY\x02\x00\x05\x00\x00", 11), TS_ERR_FORMAT,
                "11 bytes is too short for the 12-byte preamble of a version 2.0 file");
    PARSE_FAILS(raw("\x93NUMPY\x01\x00\x40\x00{}", 12), TS_ERR_FORMAT,
                "header length 64 is more than the 2 bytes after it");
    PARSE_FAILS(raw("\x93NUMPY\x03\x00\xff\xff\xff\xff{}", 14), TS_ERR_FORMAT,
                "header length 4294967295 is more than the 2 bytes after it");
    PARSE_FAILS(raw("\x93NUMPY\x01\x00\x00\x00", 10), TS_ERR_FORMAT,
                "expected '{', found the end of the header");
    /* header syntax */
    PARSE_FAILS(hdr("[]", NULL, 0), TS_ERR_FORMAT, "the header is not a Python dict");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", v6, 24),
                TS_ERR_FORMAT, "found the end of the header");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False}", NULL, 0), TS_ERR_FORMAT,
                "the header has no 'shape' key");
    PARSE_FAILS(hdr("{}", NULL, 0), TS_ERR_FORMAT, "the header has no 'descr' key");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", v6, 4),
                TS_ERR_FORMAT, "unexpected key 'x' at byte 64");
    PARSE_FAILS(hdr("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", v6, 4),
                TS_ERR_FORMAT, "key 'descr' appears twice (byte 27)");
    PARSE_FAILS(hdr("{'descr' '<f4', 'fortran_order': False, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "expected ':' after 'descr', found ''' at byte 19");
    PARSE_FAILS(hdr("{'descr': '<f4' 'fortran_order': False, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "expected ',' or '}' after the value of 'descr'");
    PARSE_FAILS(hdr("{'descr': '<f4',, 'fortran_order': False, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "expected a key as a quoted string, found ','");
    PARSE_FAILS(hdr("{'descr': '<f4, 'fortran_order': False, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                /* the string ran to the next quote */
                "expected ',' or '}' after the value of 'descr', found 'f' at byte 27");
    PARSE_FAILS(hdr("{'descr': '<f4\n', 'fortran_order': False, 'shape': ()}", v6, 4),
                TS_ERR_FORMAT, "the string opened at byte 20 is not closed");
    PARSE_FAILS(hdr("{'descr': '<\\x66\x34', 'fortran_order': False, 'shape': ()}", v6, 4),
                TS_ERR_FORMAT, "holds a backslash at byte 22 (escape sequences are not supported)");
    PARSE_FAILS(hdr("{'descr': <f4, 'fortran_order': False, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "expected the value of 'descr' as a quoted string, found '<' at byte 20");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': false, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "the value of 'fortran_order' is not True or False");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", v6, 4), TS_ERR_FORMAT,
                "'fortran_order' is not True or False");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': Trueish, 'shape': ()}", v6, 4),
                TS_ERR_FORMAT, "'fortran_order' is not True or False");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", v6, 24),
                TS_ERR_FORMAT, "the value of 'shape' is not a tuple (found '['");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", v6, 24),
                TS_ERR_FORMAT,
                "'shape' (6) is an integer, not a tuple: a 1-dim shape is written (6,)");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", v6, 24),
                TS_ERR_FORMAT, "expected ',' or ')' in 'shape', found '3'");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 0 is not an integer (found ','");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 0 is not an integer (found '.'");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0x3)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 1 is not an integer (found 'x'");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 0 at byte 61 has a leading zero");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, True)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 1 is not an integer");
    PARSE_FAILS(
        npy_file(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (6L,), }", true, v6, 24),
        TS_ERR_FORMAT, "'shape' element 0 is not an integer (found 'L'");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } x", v6, 24),
                TS_ERR_FORMAT, "unexpected 'x' at byte 68 after the header's closing '}'");
    /* non-ASCII, control bytes */
    PARSE_FAILS(
        hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'caf\xc3\xa9': 1}", v6, 24),
        TS_ERR_FORMAT, "header byte 0xc3 at byte 70 is not ASCII");
    PARSE_FAILS(hdr("{'descr': '<f4',\x01 'fortran_order': False, 'shape': (6,)}", v6, 24),
                TS_ERR_FORMAT, "header holds control byte 0x01 at byte 26");
    PARSE_FAILS(raw("\x93NUMPY\x01\x00\x02\x00{\0", 12), TS_ERR_FORMAT,
                "header holds control byte 0x00 at byte 11");
    /* shape values */
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", v6, 24),
                TS_ERR_FORMAT, "'shape' element 1 is negative (-3)");
    PARSE_FAILS(
        hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}", v6, 24),
        TS_ERR_FORMAT, "'shape' element 0 (9223372036854775808) is larger than 2^63 - 1");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': "
                    "(99999999999999999999999999999999999999999999999,)}",
                    v6, 24),
                TS_ERR_FORMAT, "(9999999999999999999999999999999999999999...) is larger");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                    "4294967296)}",
                    v6, 24),
                TS_ERR_FORMAT, "shape (4294967296, 4294967296) holds more than 2^63 - 1 elements");
    /* a zero does not excuse the other dims (NumPy's rule) */
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, "
                    "4294967296)}",
                    NULL, 0),
                TS_ERR_FORMAT, "holds more than 2^63 - 1 elements");
    PARSE_FAILS(
        hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", v6, 24),
        TS_ERR_FORMAT, "shape (4611686018427387904,) of '<f8' needs more than");
    /* the item size counts beside a zero too (NumPy's "array is too big") */
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 0, 9223372036854775807)}",
                    NULL, 0),
                TS_ERR_FORMAT,
                "shape (0, 0, 9223372036854775807) of '<f4' needs more than 9223372036854775807 "
                "bytes");
    /* the data */
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v6, 20),
                TS_ERR_FORMAT,
                "the data holds 20 bytes but shape (2, 3) of '<f4' needs 24 (the file is "
                "truncated)");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v6, 0),
                TS_ERR_FORMAT, "the data holds 0 bytes but shape (2, 3) of '<f4' needs 24");
    PARSE_FAILS(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", v6, 24),
                TS_ERR_FORMAT,
                "the data holds 24 bytes but shape (5,) of '<f4' needs 20 (bytes follow the "
                "data)");
    PARSE_FAILS(
        hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", v6, 24),
        TS_ERR_FORMAT, "needs 4000000000000 (the file is truncated)");
    PARSE_FAILS(hdr("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", "\1\0\2", 3),
                TS_ERR_FORMAT, "bool element 2 holds 2 (not 0 or 1)");
    /* descr */
    PARSE_FAILS(hdr("{'descr': 'xyz', 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_FORMAT, "unknown descr 'xyz' (np.save writes a NumPy typestr");
    PARSE_FAILS(hdr("{'descr': '<f3', 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_FORMAT, "unknown descr '<f3'");
    PARSE_FAILS(hdr("{'descr': '<b2', 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_FORMAT, "unknown descr '<b2'");
    PARSE_FAILS(hdr("{'descr': '<f04', 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_FORMAT, "unknown descr '<f04'");
    PARSE_FAILS(hdr("{'descr': '', 'fortran_order': False, 'shape': (), }", v6, 4), TS_ERR_FORMAT,
                "unknown descr ''");
    PARSE_FAILS(hdr("{'descr': 'float32', 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_FORMAT, "unknown descr 'float32'");
    PARSE_FAILS(hdr("{'descr': '<fxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', "
                    "'fortran_order': False, 'shape': (), }",
                    v6, 4),
                TS_ERR_FORMAT, "unknown descr '<fxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'");
    /* NumPy dtypes Tessera does not hold */
    PARSE_FAILS(hdr("{'descr': '<f16', 'fortran_order': False, 'shape': (), }", v6, 16),
                TS_ERR_UNSUPPORTED, "dtype '<f16' is not supported by Tessera (it reads float32");
    PARSE_FAILS(hdr("{'descr': '|S1', 'fortran_order': False, 'shape': (), }", v6, 1),
                TS_ERR_UNSUPPORTED, "dtype '|S1' is not supported");
    PARSE_FAILS(hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (), }", v6, 8),
                TS_ERR_UNSUPPORTED, "dtype '<c8' is not supported");
    PARSE_FAILS(hdr("{'descr': '<V2', 'fortran_order': False, 'shape': (), }", v6, 2),
                TS_ERR_UNSUPPORTED, "dtype '<V2' is not supported"); /* ml_dtypes' bfloat16 */
    PARSE_FAILS(hdr("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (), }", v6, 8),
                TS_ERR_UNSUPPORTED, "dtype '<M8[ns]' is not supported");
    PARSE_FAILS(hdr("{'descr': '|O', 'fortran_order': False, 'shape': (), }", v6, 8),
                TS_ERR_UNSUPPORTED, "dtype '|O' is not supported");
    PARSE_FAILS(hdr("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", v6, 4),
                TS_ERR_UNSUPPORTED, "'descr' at byte 20 is a structured dtype (a list of fields)");
    /* malformed wins over unsupported: the overflow is reported though '<c8' is not held */
    PARSE_FAILS(hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (4294967296, "
                    "4294967296)}",
                    NULL, 0),
                TS_ERR_FORMAT, "holds more than 2^63 - 1 elements");
    /* NULL data */
    CHECK(ts_npy_parse(NULL, 10, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "npy_parse: data is NULL");
    CHECK(ts_npy_parse(NULL, 0, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "<memory>: 0 bytes is too short");
}

/* File errors name the path; a malformed file's message starts with it. */
static void test_file_errors(void) {
    ts_scope_begin();
    const char *missing = tmp_path("missing.npy");
    CHECK(ts_npy_load(missing, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_IO, "npy_load: cannot open '");
    CHECK(ts_npy_load(dir, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_IO, "is not a regular file");
    CHECK(ts_npy_load(NULL, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "npy_load: path is NULL");
    const char *bad = tmp_path("bad.npy");
    blob b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", (float[5]){0}, 20);
    CHECK(write_file(bad, b.p, b.n));
    free(b.p);
    CHECK(ts_npy_load(bad, ts_cpu()) == NULL);
    char want[512];
    snprintf(want, sizeof want, "%s: the data holds 20 bytes", bad);
    CHECK(strncmp(ts_error_message(), want, strlen(want)) == 0);
    CHECK_ERR(TS_ERR_FORMAT);
    CHECK(write_file(bad, "", 0));
    CHECK(ts_npy_load(bad, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "bad.npy: 0 bytes is too short");

    /* save: bfloat16 refused, NULLs, a missing folder; the target is replaced atomically */
    ts_tensor *h = ts_to_dtype(ts_ones(TS_SHAPE(2), (ts_opts){0}), TS_BF16);
    CHECK(ts_npy_save(tmp_path("bf16.npy"), h) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "NumPy has no bfloat16 dtype; convert first, e.g. "
                                "ts_npy_save(path, ts_to_dtype(t, TS_F32))");
    CHECK(access(tmp_path("bf16.npy"), F_OK) != 0);
    CHECK(ts_npy_save(tmp_path("bf16.npy"), ts_to_dtype(h, TS_F32)) == TS_OK);
    CHECK(ts_npy_save(tmp_path("null.npy"), NULL) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "npy_save: tensor is NULL");
    ts_tensor *one = ts_ones(TS_SHAPE(3), (ts_opts){0});
    CHECK(ts_npy_save(NULL, one) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "npy_save: path is NULL");
    CHECK(ts_npy_save(tmp_path("no/such/folder.npy"), one) == TS_ERR_IO);
    CHECK_ERR_HAS(TS_ERR_IO, "npy_save: cannot create a temporary file");
    /* a pending error is kept: the NULL came from a failed op */
    ts_tensor *failed = ts_add(one, ts_ones(TS_SHAPE(4), (ts_opts){0}));
    CHECK(ts_npy_save(tmp_path("x.npy"), failed) != TS_OK);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_npy_save(tmp_path("over.npy"), one) == TS_OK);
    CHECK(ts_npy_save(tmp_path("over.npy"), ts_zeros(TS_SHAPE(2, 2), (ts_opts){0})) == TS_OK);
    ts_tensor *over = ts_npy_load(tmp_path("over.npy"), ts_cpu());
    CHECK(shape_is(over, TS_SHAPE(2, 2)));
    ts_scope_end();
}

/* ------------------------------------------------------------------ the fuzz corpus's table */
/* tools/gen_npy_corpus.py lists every corpus file with the status and a message fragment. */
static void test_corpus_table(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", __FILE__);
    char *slash = strrchr(root, '/');
    if (!slash) {
        printf("note: %s is not a path; corpus table not checked\n", __FILE__);
        return;
    }
    *slash = '\0';
    char path[1200];
    snprintf(path, sizeof path, "%s/fuzz/corpus/npy.tsv", root);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[1024];
    int files = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        CHECK(tab1 && tab2);
        if (!tab1 || !tab2) continue;
        *tab1 = *tab2 = '\0';
        char file[2100];
        snprintf(file, sizeof file, "%s/fuzz/corpus/npy/%s", root, line);
        ts_scope_begin();
        ts_tensor *t = ts_npy_load(file, ts_cpu());
        const char *got = ts_status_string(ts_error()), *msg = ts_error_message();
        bool ok = !strcmp(got, tab1 + 1) && strstr(msg, tab2 + 1) && (t != NULL) == !ts_error();
        CHECK(ok);
        if (!ok)
            printf("  %s: expected %s \"%s\", got %s \"%s\"\n", line, tab1 + 1, tab2 + 1, got, msg);
        ts_error_clear();
        ts_scope_end();
        files++;
    }
    fclose(f);
    CHECK(files >= 20);
    printf("%d corpus files checked against npy.tsv\n", files);
}

/* ------------------------------------------------------------------ allocation failures */
typedef struct sweep_st {
    ts_tensor *src; /* strided, on sim:0 */
    blob swapped;   /* a Fortran-order big-endian file: a swap buffer and a copy */
    ts_status code; /* the run's error, for check */
    bool same;      /* a successful run loaded the values saved */
} sweep_st;

static float sweep_want[20];

static void *sweep_setup(void) {
    sweep_st *s = calloc(1, sizeof *s);
    ts_tensor *r = ts_arange(0, 20, 1, (ts_opts){.dtype = TS_F32, .device = ts_sim(0)});
    ts_tensor *a = ts_reshape(r, TS_SHAPE(4, 5));
    s->src = ts_transpose(a, 0, 1); /* [5, 4] */
    ts_release(a);
    ts_release(r);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) sweep_want[i * 4 + j] = (float)(j * 5 + i);
    /* the same [5, 4] values column by column, big-endian */
    float col[20];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) col[i + 5 * j] = sweep_want[i * 4 + j];
    unsigned char be[80];
    be_bytes(be, col, 80, 4);
    s->swapped =
        npy_file(1, "{'descr': '>f4', 'fortran_order': True, 'shape': (5, 4), }", true, be, 80);
    CHECK_OK();
    return s;
}

static bool sweep_run(void *p) {
    sweep_st *s = p;
    bool ok = ts_npy_save(tmp_path("sweep.npy"), s->src) == TS_OK;
    ts_tensor *a = ok ? ts_npy_load(tmp_path("sweep.npy"), ts_sim(0)) : NULL;
    ts_tensor *b = a ? ts_npy_parse(s->swapped.p, s->swapped.n, ts_sim(1)) : NULL;
    ok = a && b && ts_error() == TS_OK;
    s->same = ok && same_bytes(a, sweep_want, 80) && same_bytes(b, sweep_want, 80);
    s->code = ts_error();
    ts_release(a);
    ts_release(b);
    return ok;
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (ok) CHECK(s->same);
    if (!ok) {
        if (s->code != TS_ERR_OOM)
            fprintf(stderr, "  expected TS_ERR_OOM, got %s\n", ts_status_string(s->code));
        CHECK_EQ(s->code, TS_ERR_OOM);
    }
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_release(s->src);
    free(s->swapped.p);
    free(s);
}

static void test_fault_sweep(void) {
    ts_sweep_case c = {.name = "npy save+load",
                       .setup = sweep_setup,
                       .run = sweep_run,
                       .teardown = sweep_teardown,
                       .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 2000);
    CHECK(st.allocations > 5);
    CHECK(st.errors > 0 && st.oom == st.errors);
    /* no temporary file is left behind by a failed save */
    DIR *d = opendir(dir);
    struct dirent *e;
    int tmp = 0;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp")) tmp++;
    if (d) closedir(d);
    CHECK_EQ(tmp, 0);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    snprintf(dir, sizeof dir, "/tmp/ts_npy_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    test_exact_bytes();
    test_round_trip_dtypes();
    test_shapes();
    test_layouts_and_devices();
    test_big_endian();
    test_fortran_order();
    test_header_variants();
    test_malformed();
    test_file_errors();
    test_corpus_table();
    test_fault_sweep();
    /* the folder's files, then the folder */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') remove(tmp_path(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
    return ts_test_finish();
}
