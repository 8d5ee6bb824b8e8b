/* test_safetensors.c — safetensors round trips of every dtype on cpu and sim:0, a file written by
 * PyTorch read value for value and re-written byte for byte, malformed-file messages, and atomic
 * writes that leave an existing file intact when they fail. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ts_test.h"

#ifndef TS_SOURCE_DIR
#define TS_SOURCE_DIR "."
#endif

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* Files in the scratch folder whose name has ".tmp" (the writer's temporaries). */
static int temp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp")) n++;
    if (d) closedir(d);
    return n;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n + 1);
    if (b && fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static bool same_shape(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

/* t's raw bytes equal want (n bytes), with t's dtype, shape and device as given. */
static void check_tensor(ts_tensor *t, ts_dtype dt, ts_shape s, ts_device dev, const void *want,
                         size_t n) {
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ(ts_dtype_of(t), dt);
    CHECK(same_shape(t, s));
    CHECK(ts_device_equal(ts_device_of(t), dev));
    CHECK_EQ(ts_nbytes(t), n);
    unsigned char got[256] = {0};
    CHECK(n <= sizeof got);
    CHECK_OK();
    if (n && n <= sizeof got) {
        CHECK(ts_copy_to_host(t, got, sizeof got) == TS_OK);
        CHECK(memcmp(got, want, n) == 0);
    }
}

/* ------------------------------------------------------------------ round trips */
/* The values of tools/check_safetensors_torch.py's tessera_written(). */
static float v_f32[6], v_scalar = 3.5f;
static double v_f64[3];
static uint16_t v_f16[4] = {0xBE00, 0xB800, 0x3800, 0x3E00};  /* -1.5 -0.5 0.5 1.5 */
static uint16_t v_bf16[4] = {0x3E80, 0x3F00, 0x3F40, 0x3F80}; /* 0.25 0.5 0.75 1 */
static int64_t v_i64[4];
static int32_t v_i32[5];
static uint8_t v_u8[4] = {0, 60, 120, 180}, v_bool[3] = {0, 1, 0};
static const float v_layer[6] = {0, 1, 2, 3, 4, 5};
static const float v_layer_t[6] = {0, 3, 1, 4, 2, 5}; /* [2, 3] transposed, row-major */

static void fill_values(void) {
    for (int i = 0; i < 6; i++) v_f32[i] = (float)(i * 0.5 - 1);
    for (int i = 0; i < 3; i++) v_f64[i] = (i + 1) / 3.0;
    for (int i = 0; i < 4; i++) v_i64[i] = i * 1000000000000LL - 7;
    for (int i = 0; i < 5; i++) v_i32[i] = i * -3;
}

static void build_list(ts_tensor_list *l, ts_device dev) {
    ts_opts o = {.device = dev};
    ts_tensor_list_add(l, "f32", ts_from_data(TS_SHAPE(2, 3), TS_F32, v_f32, o));
    ts_tensor_list_add(l, "f64", ts_from_data(TS_SHAPE(3), TS_F64, v_f64, o));
    ts_tensor_list_add(l, "f16", ts_from_data(TS_SHAPE(2, 2), TS_F16, v_f16, o));
    ts_tensor_list_add(l, "bf16", ts_from_data(TS_SHAPE(4), TS_BF16, v_bf16, o));
    ts_tensor_list_add(l, "i64", ts_from_data(TS_SHAPE(2, 2), TS_I64, v_i64, o));
    ts_tensor_list_add(l, "i32", ts_from_data(TS_SHAPE(5), TS_I32, v_i32, o));
    ts_tensor_list_add(l, "u8", ts_from_data(TS_SHAPE(4), TS_U8, v_u8, o));
    ts_tensor_list_add(l, "bool", ts_from_data(TS_SHAPE(3), TS_BOOL, v_bool, o));
    ts_tensor_list_add(l, "scalar", ts_from_data(TS_SHAPE(), TS_F32, &v_scalar, o));
    ts_tensor_list_add(l, "empty", ts_zeros(TS_SHAPE(0, 3), o));
    /* a non-contiguous view is written in row-major order */
    ts_tensor_list_add(l, "layer.0.weight", ts_t(ts_from_data(TS_SHAPE(2, 3), TS_F32, v_layer, o)));
}

static void check_list(const ts_tensor_list *l, ts_device dev) {
    CHECK_EQ(l->n, 11);
    check_tensor(ts_tensor_list_get(l, "f32"), TS_F32, TS_SHAPE(2, 3), dev, v_f32, 24);
    check_tensor(ts_tensor_list_get(l, "f64"), TS_F64, TS_SHAPE(3), dev, v_f64, 24);
    check_tensor(ts_tensor_list_get(l, "f16"), TS_F16, TS_SHAPE(2, 2), dev, v_f16, 8);
    check_tensor(ts_tensor_list_get(l, "bf16"), TS_BF16, TS_SHAPE(4), dev, v_bf16, 8);
    check_tensor(ts_tensor_list_get(l, "i64"), TS_I64, TS_SHAPE(2, 2), dev, v_i64, 32);
    check_tensor(ts_tensor_list_get(l, "i32"), TS_I32, TS_SHAPE(5), dev, v_i32, 20);
    check_tensor(ts_tensor_list_get(l, "u8"), TS_U8, TS_SHAPE(4), dev, v_u8, 4);
    check_tensor(ts_tensor_list_get(l, "bool"), TS_BOOL, TS_SHAPE(3), dev, v_bool, 3);
    check_tensor(ts_tensor_list_get(l, "scalar"), TS_F32, TS_SHAPE(), dev, &v_scalar, 4);
    check_tensor(ts_tensor_list_get(l, "empty"), TS_F32, TS_SHAPE(0, 3), dev, NULL, 0);
    check_tensor(ts_tensor_list_get(l, "layer.0.weight"), TS_F32, TS_SHAPE(3, 2), dev, v_layer_t,
                 24);
}

static void test_round_trips(void) {
    fill_values();
    const char *meta[] = {"producer", "tessera", "format", "pt"};
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int w = 0; w < 2; w++) {
        ts_scope_begin(); /* the list holds its own references past the scope */
        ts_tensor_list l = {0};
        build_list(&l, devs[w]);
        CHECK_OK();
        const char *path = tmp_path(w ? "rt_sim.safetensors" : "rt_cpu.safetensors");
        CHECK(ts_safetensors_save(path, &l, meta, 2) == TS_OK);
        ts_tensor_list_free(&l);
        ts_scope_end();
        for (int r = 0; r < 2; r++) { /* written from each device, read onto each */
            ts_tensor_list back = {0};
            CHECK(ts_safetensors_load(path, devs[r], &back) == TS_OK);
            check_list(&back, devs[r]);
            ts_tensor_list_free(&back);
        }
        char *fmt = ts_safetensors_metadata(path, "format"),
             *pr = ts_safetensors_metadata(path, "producer");
        char *none = ts_safetensors_metadata(path, "missing");
        CHECK_STREQ(fmt, "pt");
        CHECK_STREQ(pr, "tessera");
        CHECK(none == NULL);
        CHECK_OK();
        free(fmt);
        free(pr);
    }
    /* both devices wrote the same bytes; the data starts 8-byte aligned after space padding */
    size_t n1, n2;
    char *a = slurp(tmp_path("rt_cpu.safetensors"), &n1),
         *b = slurp(tmp_path("rt_sim.safetensors"), &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    uint64_t hl = 0;
    for (int i = 7; a && i >= 0; i--) hl = hl << 8 | (unsigned char)a[i];
    CHECK_EQ(hl % 8, 0);
    CHECK(a && a[8 + hl - 1] == ' ');
    static const char head[] = "{\"__metadata__\":{\"format\":\"pt\",\"producer\":\"tessera\"},"
                               "\"i64\":"; /* widest dtype first, as the Python writer orders */
    CHECK(a && strncmp(a + 8, head, sizeof head - 1) == 0);
    free(a);
    free(b);
    /* kept for tools/check_safetensors_torch.py check */
    ts_tensor_list l = {0};
    ts_scope_begin();
    build_list(&l, ts_cpu());
    ts_scope_end();
    CHECK(ts_safetensors_save("tessera_written.safetensors", &l, meta, 2) == TS_OK);
    ts_tensor_list_free(&l);

    /* an empty list makes a valid file; loading appends to a list that has entries */
    ts_tensor_list empty = {0}, acc = {0};
    CHECK(ts_safetensors_save(tmp_path("empty.safetensors"), &empty, NULL, 0) == TS_OK);
    CHECK_EQ(file_size(tmp_path("empty.safetensors")), 16); /* "{}" padded to 8 */
    CHECK(ts_safetensors_load(tmp_path("empty.safetensors"), ts_cpu(), &acc) == TS_OK);
    CHECK_EQ(acc.n, 0);
    CHECK(ts_safetensors_load(tmp_path("rt_cpu.safetensors"), ts_cpu(), &acc) == TS_OK);
    CHECK(ts_safetensors_load(tmp_path("rt_sim.safetensors"), ts_sim(1), &acc) == TS_OK);
    CHECK_EQ(acc.n, 11); /* same names: the second load replaces the tensors */
    CHECK(ts_device_equal(ts_device_of(ts_tensor_list_get(&acc, "f32")), ts_sim(1)));
    ts_tensor_list_free(&acc);
    CHECK_OK();
}

/* ------------------------------------------------------------------ PyTorch's file */
/* tests/data/torch_ref.safetensors, from tools/check_safetensors_torch.py write-ref (torch 1.13,
 * safetensors 0.8): g = torch.Generator().manual_seed(0); fc1.weight = torch.randn(3, 4, g), ...
 * The bit patterns below were printed by
 *   d = load_file(path); [hex(x & 0xffffffff) for x in d['fc1.weight'].view(torch.int32).flatten()]
 * and alike. */
static void test_torch_file(void) {
    static const uint32_t fc1_w[12] = {0x3fc53f5c, 0xbe963c50, 0xc00b7149, 0x3f1184b6,
                                       0xbf8ad1a1, 0xbfb3052d, 0x3ece837a, 0x3f5688e5,
                                       0xbf382144, 0xbece830b, 0xbf18bd18, 0x3e3a67c6};
    static const float fc1_b[3] = {-1, 0, 1}, scalar = 2.75f;
    static const double bn_var[2] = {0.35526675833930643, 0.6219052486795277};
    static const int64_t nbt = 7;
    static const uint16_t half[3] = {0x2e66, 0xc100, 0x7bff}, bhalf[3] = {0x3dcd, 0xc020, 0x7f62};
    static const int32_t idx[4] = {-1, 2, 2147483647, -2147483647 - 1};
    static const uint8_t pix[3] = {0, 7, 255}, mask[4] = {1, 0, 1, 1};
    const char *ref = TS_SOURCE_DIR "/tests/data/torch_ref.safetensors";
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int k = 0; k < 2; k++) {
        ts_device d = devs[k];
        ts_tensor_list l = {0};
        CHECK(ts_safetensors_load(ref, d, &l) == TS_OK);
        CHECK_EQ(l.n, 11);
        check_tensor(ts_tensor_list_get(&l, "fc1.weight"), TS_F32, TS_SHAPE(3, 4), d, fc1_w, 48);
        check_tensor(ts_tensor_list_get(&l, "fc1.bias"), TS_F32, TS_SHAPE(3), d, fc1_b, 12);
        check_tensor(ts_tensor_list_get(&l, "bn.running_var"), TS_F64, TS_SHAPE(2), d, bn_var, 16);
        check_tensor(ts_tensor_list_get(&l, "bn.num_batches_tracked"), TS_I64, TS_SHAPE(), d, &nbt,
                     8);
        check_tensor(ts_tensor_list_get(&l, "half"), TS_F16, TS_SHAPE(3), d, half, 6);
        check_tensor(ts_tensor_list_get(&l, "bhalf"), TS_BF16, TS_SHAPE(3), d, bhalf, 6);
        check_tensor(ts_tensor_list_get(&l, "idx32"), TS_I32, TS_SHAPE(2, 2), d, idx, 16);
        check_tensor(ts_tensor_list_get(&l, "pixels"), TS_U8, TS_SHAPE(3), d, pix, 3);
        check_tensor(ts_tensor_list_get(&l, "mask"), TS_BOOL, TS_SHAPE(4), d, mask, 4);
        check_tensor(ts_tensor_list_get(&l, "empty"), TS_F32, TS_SHAPE(0, 5), d, NULL, 0);
        check_tensor(ts_tensor_list_get(&l, "scalar"), TS_F32, TS_SHAPE(), d, &scalar, 4);
        char *fmt = ts_safetensors_metadata(ref, "format");
        CHECK_STREQ(fmt, "pt");
        free(fmt);
        /* written back, the file is PyTorch's byte for byte (same order, JSON and padding) */
        const char *meta[] = {"format", "pt"};
        CHECK(ts_safetensors_save(tmp_path("torch_again.safetensors"), &l, meta, 1) == TS_OK);
        size_t n1 = 0, n2 = 0;
        char *a = slurp(ref, &n1), *b = slurp(tmp_path("torch_again.safetensors"), &n2);
        CHECK(a && b && n1 == n2 && n1 > 0 && memcmp(a, b, n1) == 0);
        free(a);
        free(b);
        ts_tensor_list_free(&l);
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ malformed files, errors */
static void write_raw(const char *path, const char *json, size_t data_bytes) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(json);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(json, 1, n, f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

static void test_read_errors(void) {
    const char *p = tmp_path("bad.safetensors");
    write_raw(p, "{\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,100]}}",
              100);
    ts_tensor_list l = {0};
    CHECK(ts_safetensors_load(p, ts_cpu(), &l) == TS_ERR_FORMAT);
    char want[1024];
    snprintf(want, sizeof want,
             "%s: tensor 'fc1.weight': data_offsets [0, 100] hold 100 bytes but shape [3, 4] of "
             "F32 needs 48",
             p);
    CHECK_STREQ(ts_error_message(), want);
    CHECK_ERR(TS_ERR_FORMAT);
    CHECK_EQ(l.n, 0);
    char *m = ts_safetensors_metadata(p, "format"); /* the header is validated here too */
    CHECK(m == NULL);
    CHECK_ERR(TS_ERR_FORMAT);

    write_raw(p, "{\"q\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    CHECK(ts_safetensors_load(p, ts_cpu(), &l) == TS_ERR_UNSUPPORTED);
    CHECK(strstr(ts_error_message(), "tensor 'q': dtype F8_E5M2 is not supported") != NULL);
    CHECK_ERR(TS_ERR_UNSUPPORTED);

    CHECK(ts_safetensors_load(tmp_path("nope.safetensors"), ts_cpu(), &l) == TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "No such file or directory") != NULL);
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_safetensors_load(tmpdir, ts_cpu(), &l) == TS_ERR_IO); /* a folder */
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_safetensors_load(tmp_path("rt_cpu.safetensors"), ts_sim(9), &l) == TS_ERR_DEVICE);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_safetensors_load(NULL, ts_cpu(), &l) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_safetensors_parse("", 0, ts_cpu(), NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(l.n, 0);
}

/* A header of n bytes (padded with spaces) behind its 8-byte length, in memory. */
static char *header_file(const char *json, size_t n) {
    char *b = malloc(8 + n);
    for (int i = 0; i < 8; i++) b[i] = (char)((uint64_t)n >> (8 * i));
    memset(b + 8, ' ', n);
    memcpy(b + 8, json, strlen(json));
    return b;
}

/* The limits that keep a hostile header cheap: 16 MiB, 2^21 JSON values, 3 levels of nesting;
 * every one refused before the header is parsed. */
static void test_header_limits(void) {
    ts_tensor_list l = {0};
    char *b = header_file("{}", 16 << 20); /* at the limit: an empty (padded) header is fine */
    CHECK_EQ(ts_safetensors_parse(b, 8 + (16 << 20), ts_cpu(), &l), TS_OK);
    b[0] = 1; /* one byte more than 16 MiB */
    CHECK_EQ(ts_safetensors_parse(b, 8 + (16 << 20), ts_cpu(), &l), TS_ERR_FORMAT);
    CHECK_STREQ(ts_error_message(),
                "<memory>: header length 16777217 is over the limit of 16777216 bytes");
    ts_error_clear();
    free(b);
    /* 2^21 values pass the count (then fail as a header), one more does not */
    for (int extra = 0; extra < 2; extra++) {
        size_t n = (size_t)1 << 21, len = 6 + 2 * (n - 2) + 2; /* {"a":[0,0,...]} = n values */
        char *json = malloc(len + (size_t)extra * 2 + 1), *p = json;
        p += sprintf(p, "{\"a\":[");
        for (size_t i = 0; i < n - 2 + (size_t)extra; i++) p += sprintf(p, i ? ",0" : "0");
        p += sprintf(p, "]}");
        b = header_file(json, (size_t)(p - json));
        CHECK_EQ(ts_safetensors_parse(b, 8 + (size_t)(p - json), ts_cpu(), &l), TS_ERR_FORMAT);
        CHECK(strstr(ts_error_message(), extra ? "header holds more than 2097152 JSON values"
                                               : "tensor 'a': expected an object") != NULL);
        ts_error_clear();
        free(b);
        free(json);
    }
    const char *deep = "{\"a\":{\"b\":[[0]]}}", *strings = "{\"\\\"[[[[\":{\"\\\\[\":0}}";
    b = header_file(deep, strlen(deep));
    CHECK_EQ(ts_safetensors_parse(b, 8 + strlen(deep), ts_cpu(), &l), TS_ERR_FORMAT);
    CHECK_STREQ(ts_error_message(), "<memory>: header nests deeper than 3 levels (byte 11): a "
                                    "safetensors header is an object of tensors holding arrays "
                                    "of integers");
    ts_error_clear();
    free(b);
    /* brackets inside names are text, not nesting */
    b = header_file(strings, strlen(strings));
    CHECK_EQ(ts_safetensors_parse(b, 8 + strlen(strings), ts_cpu(), &l), TS_ERR_FORMAT);
    CHECK(strstr(ts_error_message(), "unexpected field") != NULL);
    ts_error_clear();
    free(b);
    CHECK_EQ(l.n, 0);
}

/* ------------------------------------------------------------------ atomic writes */
static void expect_intact(const char *path, const char *orig, size_t orig_n) {
    size_t n = 0;
    char *now = slurp(path, &n);
    CHECK(now && n == orig_n && memcmp(now, orig, n) == 0);
    free(now);
    ts_tensor_list l = {0};
    CHECK(ts_safetensors_load(path, ts_cpu(), &l) == TS_OK);
    CHECK_EQ(l.n, 11);
    ts_tensor_list_free(&l);
    CHECK_EQ(temp_files(), 0);
}

static void test_atomic(void) {
    const char *path = tmp_path("rt_cpu.safetensors");
    size_t orig_n;
    char *orig = slurp(path, &orig_n);
    CHECK(orig != NULL);
    ts_tensor *big = ts_zeros(TS_SHAPE(1 << 20), (ts_opts){0}); /* 4 MB */
    ts_tensor_list l = {0};
    ts_tensor_list_add(&l, "big", big);

    /* argument errors are found before any file exists */
    ts_tensor_list bad = {0};
    ts_tensor_list_add(&bad, "ok", big);
    ts_tensor *null_t = NULL;
    char *null_name = "missing";
    ts_tensor_list with_null = {.n = 1, .cap = 1, .names = &null_name, .tensors = &null_t};
    CHECK(ts_safetensors_save(path, &with_null, NULL, 0) == TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "tensor 'missing' is NULL") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    char *names2[2] = {"w", "w"};
    ts_tensor *ts2[2] = {big, big};
    ts_tensor_list dup = {.n = 2, .cap = 2, .names = names2, .tensors = ts2};
    CHECK(ts_safetensors_save(path, &dup, NULL, 0) == TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "'w' appears twice") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    const char *meta_dup[] = {"k", "1", "k", "2"};
    CHECK(ts_safetensors_save(path, &bad, meta_dup, 2) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    char *reserved = "__metadata__", *bad_utf8 = "\xff\xfe";
    ts_tensor_list res = {.n = 1, .cap = 1, .names = &reserved, .tensors = &big};
    CHECK(ts_safetensors_save(path, &res, NULL, 0) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    res.names = &bad_utf8;
    CHECK(ts_safetensors_save(path, &res, NULL, 0) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    expect_intact(path, orig, orig_n);

    /* the disk fills up mid-write (a file size limit works even for root): EFBIG */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit lim = {1 << 20, old.rlim_max};
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    ts_status st = ts_safetensors_save(path, &l, NULL, 0);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_EQ(st, TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "File too large") != NULL);
    CHECK(strstr(ts_error_message(), path) != NULL);
    CHECK_ERR(TS_ERR_IO);
    expect_intact(path, orig, orig_n);

    /* the rename fails (the target is a folder): the temporary file is removed */
    const char *folder = tmp_path("a_folder");
    mkdir(folder, 0755);
    CHECK(ts_safetensors_save(folder, &l, NULL, 0) == TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "renaming") != NULL);
    CHECK_ERR(TS_ERR_IO);
    CHECK_EQ(temp_files(), 0);
    rmdir(folder);

    /* no such folder; a read-only folder (root ignores permissions, so only checked otherwise) */
    CHECK(ts_safetensors_save(tmp_path("no/such/dir/x.safetensors"), &l, NULL, 0) == TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "No such file or directory") != NULL);
    CHECK_ERR(TS_ERR_IO);
    if (geteuid() != 0) {
        chmod(tmpdir, 0555);
        CHECK(ts_safetensors_save(path, &l, NULL, 0) == TS_ERR_IO);
        CHECK(strstr(ts_error_message(), "Permission denied") != NULL);
        CHECK_ERR(TS_ERR_IO);
        chmod(tmpdir, 0755);
        expect_intact(path, orig, orig_n);
    }

    /* a successful write replaces the file whole */
    CHECK(ts_safetensors_save(path, &l, NULL, 0) == TS_OK);
    CHECK_EQ(file_size(path), 8 + 72 + (4 << 20)); /* 68 bytes of JSON, padded to 72 */
    CHECK_EQ(temp_files(), 0);
    ts_tensor_list_free(&l);
    ts_tensor_list_free(&bad);
    ts_release(big);
    free(orig);
    CHECK_OK();
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' || strstr(de->d_name, ".tmp")) unlink(tmp_path(de->d_name));
    if (d) closedir(d);
    rmdir(tmpdir);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_safetensors_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_round_trips();
    test_torch_file();
    test_read_errors();
    test_header_limits();
    test_atomic();
    remove_tmpdir();
    return ts_test_finish();
}
