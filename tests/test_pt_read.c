/* test_pt_read.c — ts_load_pt over the checkpoints PyTorch 2.15 wrote (the .pt files of
 * tests/data/pt, from tools/make_pt_fixtures.py), each compared name by name, dtype, shape and bit
 * for bit with the NumPy arrays beside it (<name>.npz, read with libzip and ts_npy_parse); then
 * checkpoints built here: stored and deflated entries, a big-endian file, tied tensors, and hostile
 * files (a truncated zip, a storage shorter than the pickle claims, os.system, deep nesting, huge
 * claimed sizes...) each refused with its error. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "tessera/pt.h"
#include "ts_test.h"

#ifndef TS_SOURCE_DIR
#define TS_SOURCE_DIR "."
#endif
#define PT_DIR TS_SOURCE_DIR "/tests/data/pt/"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (b && fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* ------------------------------------------------------------------ the NumPy reference */

/* One array of an .npz: ts_npy_parse for the dtypes it reads; for the rest (int8, int16, uint16,
 * uint32, uint64) the header's descr and shape are read here. */
typedef struct ref_array {
    char name[256];
    char descr[8];
    int ndim;
    int64_t shape[8];
    unsigned char *data;
    size_t nbytes;
} ref_array;

static bool parse_npy_header(const unsigned char *b, size_t n, ref_array *r) {
    if (n < 10 || memcmp(b, "\x93NUMPY", 6) != 0) return false;
    size_t hl = b[6] == 1 ? (size_t)(b[8] | b[9] << 8) : (size_t)(b[8] | b[9] << 8 | b[10] << 16);
    size_t start = b[6] == 1 ? 10 : 12;
    if (start + hl > n) return false;
    char hdr[512];
    snprintf(hdr, sizeof hdr, "%.*s", (int)hl, (const char *)b + start);
    const char *d = strstr(hdr, "'descr': '"), *s = strstr(hdr, "'shape': (");
    if (!d || !s || strstr(hdr, "'fortran_order': True")) return false;
    snprintf(r->descr, sizeof r->descr, "%.3s", d + 10);
    r->ndim = 0;
    for (const char *p = s + 10; *p && *p != ')';) {
        char *e;
        long long v = strtoll(p, &e, 10);
        if (e == p) break;
        r->shape[r->ndim++] = v;
        p = e;
        while (*p == ',' || *p == ' ') p++;
    }
    r->data = malloc(n - start - hl + 1);
    r->nbytes = n - start - hl;
    memcpy(r->data, b + start + hl, r->nbytes);
    return true;
}

static int read_npz(const char *path, ref_array *out, int max) {
    int err = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &err);
    CHECK(za != NULL);
    if (!za) return 0;
    int n = 0;
    for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0) && n < max; i++) {
        zip_stat_t zs;
        zip_stat_index(za, (zip_uint64_t)i, 0, &zs);
        unsigned char *b = malloc(zs.size + 1);
        zip_file_t *f = zip_fopen_index(za, (zip_uint64_t)i, 0);
        CHECK(f && zip_fread(f, b, zs.size) == (zip_int64_t)zs.size);
        zip_fclose(f);
        ref_array *r = &out[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%.*s", (int)strlen(zs.name) - 4, zs.name);
        ts_tensor *t = ts_npy_parse(b, zs.size, ts_cpu());
        if (t) {
            CHECK(parse_npy_header(b, zs.size, r)); /* descr */
            r->ndim = ts_ndim(t);
            for (int d = 0; d < r->ndim; d++) r->shape[d] = ts_shape_of(t).dims[d];
            CHECK_EQ((long long)r->nbytes, (long long)ts_nbytes(t));
            CHECK(ts_copy_to_host(t, r->data, r->nbytes) == TS_OK);
            ts_release(t);
        } else {
            CHECK_ERR(TS_ERR_UNSUPPORTED); /* the dtypes .npy's reader leaves out */
            CHECK(parse_npy_header(b, zs.size, r));
        }
        free(b);
    }
    zip_close(za);
    return n;
}

static ts_dtype descr_dtype(const char *d) {
    static const struct {
        const char *descr;
        ts_dtype dt;
    } map[] = {{"<f4", TS_F32},  {"<f8", TS_F64}, {"<f2", TS_F16}, {"<i8", TS_I64},
               {"<i4", TS_I32},  {"<i2", TS_I16}, {"|i1", TS_I8},  {"|u1", TS_U8},
               {"|b1", TS_BOOL}, {"<u2", TS_U16}, {"<u4", TS_U32}, {"<u8", TS_U64}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(d, map[i].descr)) return map[i].dt;
    return TS_DTYPE_DEFAULT;
}

/* Every tensor of <name>.pt equals <name>.npz's array of the same name, in the same order. */
static void check_fixture(const char *name, ts_device dev) {
    char pt[512], npz[512];
    snprintf(pt, sizeof pt, PT_DIR "%s.pt", name);
    snprintf(npz, sizeof npz, PT_DIR "%s.npz", name);
    ref_array *refs = calloc(64, sizeof *refs);
    int n = read_npz(npz, refs, 64);
    ts_tensor_list l = {0};
    ts_status st = ts_load_pt(pt, dev, &l);
    CHECK_EQ(st, TS_OK);
    CHECK_OK();
    CHECK_EQ(l.n, n);
    if (l.n != n) fprintf(stderr, "%s: %d tensors, %d arrays\n", name, l.n, n);
    for (int i = 0; i < n && i < l.n; i++) {
        const ref_array *r = &refs[i];
        ts_tensor *t = l.tensors[i];
        CHECK_STREQ(l.names[i], r->name);
        CHECK(ts_device_equal(ts_device_of(t), dev));
        CHECK(ts_is_contiguous(t));
        CHECK_EQ(ts_ndim(t), r->ndim);
        for (int d = 0; d < r->ndim && d < ts_ndim(t); d++)
            CHECK_EQ((long long)ts_shape_of(t).dims[d], (long long)r->shape[d]);
        size_t nb = ts_nbytes(t);
        unsigned char *got = malloc(nb + 1);
        CHECK(ts_copy_to_host(t, got, nb) == TS_OK);
        if (ts_dtype_of(t) == TS_BF16) {
            /* the .npz holds bfloat16 widened to float32: exactly its bits << 16 */
            CHECK_STREQ(r->descr, "<f4");
            CHECK_EQ((long long)r->nbytes, (long long)nb * 2);
            for (size_t k = 0; k < nb / 2 && r->nbytes == nb * 2; k++) {
                uint16_t h;
                uint32_t f;
                memcpy(&h, got + 2 * k, 2);
                memcpy(&f, r->data + 4 * k, 4);
                CHECK_EQ((uint32_t)h << 16, f);
            }
        } else {
            CHECK_EQ(ts_dtype_of(t), descr_dtype(r->descr));
            CHECK_EQ((long long)nb, (long long)r->nbytes);
            CHECK(nb == r->nbytes && memcmp(got, r->data, nb) == 0);
        }
        free(got);
    }
    for (int i = 0; i < n; i++) free(refs[i].data);
    free(refs);
    ts_tensor_list_free(&l);
}

/* ------------------------------------------------------------------ building checkpoints */

typedef struct buf {
    unsigned char b[1 << 16];
    size_t n;
} buf;

static void put(buf *p, const void *s, size_t n) {
    if (p->n + n > sizeof p->b) abort();
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void op(buf *p, const char *s) { put(p, s, strlen(s)); }
static void str(buf *p, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    put(p, "X", 1);
    put(p, &n, 4);
    put(p, s, n);
}
static void bint(buf *p, int32_t v) {
    put(p, "J", 1);
    put(p, &v, 4);
}

/* _rebuild_tensor_v2(('storage', torch.<stype>, key, 'cpu', numel), offset, size, stride, False,
 * OrderedDict()) */
static void tensor(buf *p, const char *stype, const char *key, int numel, int offset, int ndim,
                   const int *size, const int *stride) {
    op(p, "ctorch._utils\n_rebuild_tensor_v2\n((");
    str(p, "storage");
    op(p, "ctorch\n");
    op(p, stype);
    op(p, "\n");
    str(p, key);
    str(p, "cpu");
    bint(p, numel);
    op(p, "tQ");
    bint(p, offset);
    op(p, "(");
    for (int i = 0; i < ndim; i++) bint(p, size[i]);
    op(p, "t(");
    for (int i = 0; i < ndim; i++) bint(p, stride[i]);
    op(p, "t\x89"
          "ccollections\nOrderedDict\n)RtR");
}

typedef struct entry {
    const char *name; /* under the archive folder */
    const void *data;
    size_t n;
} entry;

/* A zip "<path stem>/<entry>" of the entries (data.pkl first), deflated or stored. */
static void write_zip(const char *path, const entry *e, int n, bool deflate) {
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    CHECK(za != NULL);
    if (!za) return;
    for (int i = 0; i < n; i++) {
        char name[256];
        snprintf(name, sizeof name, "archive/%s", e[i].name);
        zip_source_t *s = zip_source_buffer(za, e[i].data, e[i].n, 0);
        zip_int64_t idx = zip_file_add(za, name, s, ZIP_FL_OVERWRITE);
        CHECK(idx >= 0);
        zip_set_file_compression(za, (zip_uint64_t)idx, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    }
    CHECK(zip_close(za) == 0);
}

static ts_status load_pkl(const buf *pkl, const entry *storages, int ns, ts_tensor_list *l) {
    entry e[8] = {{"data.pkl", pkl->b, pkl->n}};
    for (int i = 0; i < ns; i++) e[i + 1] = storages[i];
    const char *path = tmp_path("built.pt");
    write_zip(path, e, ns + 1, false);
    return ts_load_pt(path, ts_cpu(), l);
}

/* a dict {"w": tensor} over storage "0" */
static ts_status load_one(const char *stype, int numel, int offset, int ndim, const int *size,
                          const int *stride, const void *data, size_t nbytes) {
    buf *p = calloc(1, sizeof *p);
    op(p, "\x80\x02}(");
    str(p, "w");
    tensor(p, stype, "0", numel, offset, ndim, size, stride);
    op(p, "u.");
    entry s = {"data/0", data, nbytes};
    ts_tensor_list l = {0};
    ts_status st = load_pkl(p, &s, 1, &l);
    free(p);
    ts_tensor_list_free(&l);
    return st;
}

/* ------------------------------------------------------------------ tests */

static void test_fixtures(void) {
    const char *names[] = {"linear", "conv2d", "mlp", "zoo", "checkpoint", "dtypes", "views"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_fixture(names[i], ts_cpu());
    check_fixture("checkpoint", ts_sim(1));
    check_fixture("dtypes", ts_sim(0));
}

static void test_refused_fixtures(void) {
    ts_tensor_list l = {0};
    CHECK(ts_load_pt(PT_DIR "module.pt", ts_cpu(), &l) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED,
                  "Unsupported global: GLOBAL torch.nn.modules.container.Sequential");
    CHECK(ts_load_pt(PT_DIR "numpy.pt", ts_cpu(), &l) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "GLOBAL numpy._core.multiarray._reconstruct");
    CHECK_EQ(l.n, 0);
    CHECK(ts_load_pt(PT_DIR "missing.pt", ts_cpu(), &l) == TS_ERR_IO);
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_load_pt(PT_DIR "views.npz", ts_cpu(), &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "no <archive>/data.pkl");
    CHECK(ts_load_pt(NULL, ts_cpu(), &l) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_load_pt(PT_DIR "linear.pt", ts_cpu(), NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_load_pt(PT_DIR "linear.pt", ts_sim(9), &l) == TS_ERR_DEVICE);
    CHECK_ERR(TS_ERR_DEVICE);
}

/* views.pt read from memory, then cut short: every prefix is an error, never a crash */
static void test_truncated(void) {
    size_t n;
    unsigned char *b = slurp(PT_DIR "views.pt", &n);
    CHECK(b != NULL);
    if (!b) return;
    ts_tensor_list l = {0};
    CHECK(ts_load_pt_parse(b, n, ts_cpu(), &l) == TS_OK);
    CHECK_EQ(l.n, 6);
    ts_tensor_list_free(&l);
    int failed = 0;
    for (size_t cut = 0; cut < n; cut += 7) {
        ts_status st = ts_load_pt_parse(b, cut, ts_cpu(), &l);
        failed += st == TS_ERR_FORMAT;
        ts_error_clear();
    }
    CHECK_EQ(failed, (int)((n + 6) / 7));
    CHECK_EQ(l.n, 0);
    CHECK(ts_load_pt_parse(b, n / 2, ts_cpu(), &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "<memory>: not a readable zip archive");
    free(b);
}

/* stored and deflated storages, values and views read from bytes made here */
static void test_built(void) {
    float v[6] = {1, 2, 3, 4, 5, 6};
    for (int deflate = 0; deflate < 2; deflate++) {
        buf *p = calloc(1, sizeof *p);
        op(p, "\x80\x02}(");
        str(p, "a");
        tensor(p, "FloatStorage", "0", 6, 0, 2, (int[]){2, 3}, (int[]){3, 1});
        op(p, "q\x07"); /* memo 7: the same tensor again under "tied" */
        str(p, "t");
        tensor(p, "FloatStorage", "0", 6, 1, 2, (int[]){2, 2}, (int[]){1, 3}); /* a[:, 1:].T */
        str(p, "tied");
        op(p, "h\x07u.");
        entry e[2] = {{"data.pkl", p->b, p->n}, {"data/0", v, sizeof v}};
        const char *path = tmp_path("stored.pt");
        write_zip(path, e, 2, deflate);
        ts_tensor_list l = {0};
        CHECK(ts_load_pt(path, ts_cpu(), &l) == TS_OK);
        CHECK_OK();
        CHECK_EQ(l.n, 3);
        if (l.n == 3) {
            CHECK_STREQ(l.names[1], "t");
            float t[4];
            CHECK(ts_copy_to_host(l.tensors[1], t, sizeof t) == TS_OK);
            const float want[4] = {2, 5, 3, 6};
            CHECK(memcmp(t, want, sizeof t) == 0);
            CHECK(l.tensors[0] == l.tensors[2]); /* one tensor object, one ts_tensor */
        }
        ts_tensor_list_free(&l);
        free(p);
    }
    /* a file that is one tensor: one entry named "" */
    buf *p = calloc(1, sizeof *p);
    op(p, "\x80\x02");
    tensor(p, "FloatStorage", "0", 6, 5, 0, NULL, NULL);
    op(p, ".");
    ts_tensor_list l = {0};
    CHECK(load_pkl(p, &(entry){"data/0", v, sizeof v}, 1, &l) == TS_OK);
    CHECK(l.n == 1 && !strcmp(l.names[0], "") && ts_item(l.tensors[0]) == 6.0);
    ts_tensor_list_free(&l);
    /* a big-endian file (byteorder "big"): int32 1, 256 written big-endian */
    p->n = 0;
    op(p, "\x80\x02]");
    tensor(p, "IntStorage", "0", 2, 0, 1, (int[]){2}, (int[]){1});
    op(p, "a.");
    const unsigned char be[8] = {0, 0, 0, 1, 0, 0, 1, 0};
    entry e[3] = {{"data.pkl", p->b, p->n}, {"byteorder", "big", 3}, {"data/0", be, 8}};
    write_zip(tmp_path("be.pt"), e, 3, true);
    CHECK(ts_load_pt(tmp_path("be.pt"), ts_cpu(), &l) == TS_OK);
    int32_t got[2] = {0};
    CHECK(l.n == 1 && !strcmp(l.names[0], "0") &&
          ts_copy_to_host(l.tensors[0], got, sizeof got) == TS_OK);
    CHECK(got[0] == 1 && got[1] == 256);
    ts_tensor_list_free(&l);
    free(p);
}

static void test_hostile(void) {
    float v[6] = {0};
    /* a storage entry shorter (and one longer) than the pickle claims */
    CHECK(load_one("FloatStorage", 6, 0, 1, (int[]){6}, (int[]){1}, v, 20) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "holds 20 bytes but the pickle claims 24");
    CHECK(load_one("FloatStorage", 4, 0, 1, (int[]){4}, (int[]){1}, v, 24) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "holds 24 bytes but the pickle claims 16");
    /* a view past its storage; a negative stride */
    CHECK(load_one("FloatStorage", 6, 4, 1, (int[]){3}, (int[]){1}, v, 24) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "reaches past the end of its 24-byte storage '0'");
    CHECK(load_one("FloatStorage", 6, 4, 1, (int[]){2}, (int[]){-1}, v, 24) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "tensor stride[0] is not an int >= 0");
    /* a huge claimed storage; a huge expanded view of a small one */
    CHECK(load_one("FloatStorage", 2000000000, 0, 1, (int[]){6}, (int[]){1}, v, 24) ==
          TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "holds 24 bytes but the pickle claims 8000000000");
    CHECK(load_one("FloatStorage", 1, 0, 3, (int[]){1 << 30, 1 << 30, 1 << 30}, (int[]){0, 0, 0}, v,
                   4) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "needs more than 2^62 bytes");
    CHECK(load_one("FloatStorage", 1, 0, 2, (int[]){1 << 20, 1 << 20}, (int[]){0, 0}, v, 4) ==
          TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "would take more than");
    /* 9 dims; a bool byte that is not 0 or 1 */
    int nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(load_one("FloatStorage", 1, 0, 9, nine, nine, v, 4) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "9 dims");
    CHECK(load_one("BoolStorage", 2, 0, 1, (int[]){2}, (int[]){1}, "\x01\x02", 2) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "bool element 1");
    CHECK(load_one("ComplexFloatStorage", 1, 0, 1, (int[]){1}, (int[]){1}, v, 8) ==
          TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "complex64");

    buf *p = calloc(1, sizeof *p);
    ts_tensor_list l = {0};
    /* os.system('ls'), through posix, os and STACK_GLOBAL: refused before anything runs */
    const char *sys_pkls[] = {"\x80\x02"
                              "cposix\nsystem\n\x8c\x02lsq\x01\x85R.",
                              "\x80\x02"
                              "cos\nsystem\n\x8c\x02ls\x85R.",
                              "\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02ls\x85R."};
    const char *sys_msg[] = {"GLOBAL posix.system whose module posix is blocked",
                             "GLOBAL os.system whose module os is blocked",
                             "GLOBAL os.system whose module os is blocked"};
    for (int i = 0; i < 3; i++) {
        p->n = 0;
        op(p, sys_pkls[i]);
        CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_UNSUPPORTED);
        CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, sys_msg[i]);
    }
    p->n = 0;
    op(p, "\x80\x02"
          "c__builtin__\neval\n\x8c\x01"
          "1\x85R.");
    CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "Unsupported global: GLOBAL eval was not an allowed global");
    /* nesting: 100000 lists in one another; 5000 open MARKs */
    p->n = 0;
    op(p, "\x80\x02");
    for (int i = 0; i < 20000; i++) op(p, "]");
    for (int i = 0; i < 19999; i++) op(p, "a");
    op(p, ".");
    CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "nests deeper than 64 containers");
    p->n = 0;
    op(p, "\x80\x02");
    for (int i = 0; i < 5000; i++) op(p, "(");
    op(p, ".");
    CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "more than 4096 nested MARKs");
    /* shared containers: [x, x], then [L, L] of it again and again name 2^N paths: refused at
     * 4M visits (x an int), 1M tensor names, or 64 MB of names (a long key above them) */
    const char *dag_msg[] = {"reference each other more than", "more than 1048576 tensor names",
                             "bytes of names"};
    for (int k = 0; k < 3; k++) {
        p->n = 0;
        op(p, "\x80\x02}(");
        char key[4000];
        memset(key, 'k', sizeof key - 1);
        key[k == 2 ? sizeof key - 1 : 1] = '\0';
        str(p, key);
        op(p, "](");
        if (k == 0)
            op(p, "K\x01");
        else
            tensor(p, "FloatStorage", "0", 1, 0, 0, NULL, NULL);
        op(p, "q\x01"
              "h\x01"
              "e");
        for (int i = 0; i < (k == 2 ? 14 : 40); i++)
            op(p, "q\x02"
                  "0](h\x02"
                  "h\x02"
                  "e");
        op(p, "u.");
        CHECK(load_pkl(p, &(entry){"data/0", v, 4}, 1, &l) == TS_ERR_FORMAT);
        CHECK_ERR_HAS(TS_ERR_FORMAT, dag_msg[k]);
    }
    /* a huge memo index, a memo slot never stored, no STOP, an unknown opcode, a short string */
    const char *bad[] = {"\x80\x02Nr\xff\xff\xff\x7f.", "\x80\x02h\x05.", "\x80\x02N",
                         "\x80\x02\xff.",
                         "\x80\x02\x8c\x7f"
                         "ab."};
    const char *bad_msg[] = {"memo index 2147483647 is over the limit", "memo index 5 was never",
                             "ends without STOP", "unknown opcode", "pass the end of the pickle"};
    for (int i = 0; i < 5; i++) {
        p->n = 0;
        op(p, bad[i]);
        CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_FORMAT);
        CHECK_ERR_HAS(TS_ERR_FORMAT, bad_msg[i]);
    }
    /* a tensor whose storage entry is missing; a name twice */
    p->n = 0;
    op(p, "\x80\x02}(");
    str(p, "w");
    tensor(p, "FloatStorage", "7", 1, 0, 0, NULL, NULL);
    op(p, "u.");
    CHECK(load_pkl(p, NULL, 0, &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "storage '7' has no zip entry 'archive/data/7'");
    p->n = 0;
    op(p, "\x80\x02}(");
    str(p, "a.b");
    tensor(p, "FloatStorage", "0", 1, 0, 0, NULL, NULL);
    str(p, "a");
    op(p, "}(");
    str(p, "b");
    tensor(p, "FloatStorage", "0", 1, 0, 0, NULL, NULL);
    op(p, "uu.");
    CHECK(load_pkl(p, &(entry){"data/0", v, 4}, 1, &l) == TS_ERR_FORMAT);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "tensor name 'a.b' appears twice");
    CHECK_EQ(l.n, 0);
    /* PyTorch's legacy format */
    CHECK(ts_load_pt_parse("\x80\x02\x8a\x0a", 4, ts_cpu(), &l) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "legacy format");
    free(p);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_pt_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_fixtures();
    test_refused_fixtures();
    test_truncated();
    test_built();
    test_hostile();
    const char *files[] = {"built.pt", "stored.pt", "be.pt"};
    for (int i = 0; i < 3; i++) unlink(tmp_path(files[i]));
    rmdir(tmpdir);
    return ts_test_finish();
}
