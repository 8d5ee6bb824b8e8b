/* test_onnx_load_external.c — the ONNX loader's external data (TensorProtos whose values are in
 * a file beside the model), on the base model of tests/onnx_support/onnx_load_base.h: a file and
 * an offset into one load; data that leaves the model's folder (an absolute path, .., a/../..),
 * is missing, short, at an offset past its end, of the wrong length, a folder or a FIFO, or a
 * model loaded from a buffer without its folder, is refused with its error code and a message
 * naming what is wrong; a model file loads its external data from its own folder. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_load_base.h"

/* ------------------------------------------------------------------ external data */
static char dir[256];

static char *in_dir(const char *name) {
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static void write_file(const char *name, const void *data, size_t n) {
    FILE *f = fopen(in_dir(name), "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

/* w stored in an external file; offset and length NULL when absent */
static Onnx__ModelProto *external(const char *loc, const char *offset, const char *length) {
    Onnx__TensorProto *w = tensor("w", FLOAT, 2, d23, NULL, 0);
    w->has_data_location = 1;
    w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    w->external_data = get(3 * sizeof *w->external_data);
    const char *kv[3][2] = {{"location", loc}, {"offset", offset}, {"length", length}};
    for (int i = 0; i < 3; i++) {
        if (!kv[i][1]) continue;
        Onnx__StringStringEntryProto *e = get(sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = str(kv[i][0]);
        e->value = str(kv[i][1]);
        w->external_data[w->n_external_data++] = e;
    }
    return with_w(w);
}

/* external data in the model's folder that the loader refuses: the location, offset and length
 * (NULL: absent), the error code and a fragment of its message */
typedef struct ext_refusal {
    const char *what, *loc, *offset, *length;
    ts_status code;
    const char *frag;
} ext_refusal;

static const ext_refusal refusals[] = {
    {"external data, absolute path", "/etc/passwd", NULL, NULL, TS_ERR_FORMAT,
     "external data location '/etc/passwd' leaves the model's folder"},
    {"external data, ..", "../w.bin", NULL, NULL, TS_ERR_FORMAT,
     "location '../w.bin' leaves the model's folder"},
    {"external data, a/../..", "folder/../../w.bin", NULL, NULL, TS_ERR_FORMAT,
     "leaves the model's folder"},
    {"external data, missing file", "nope.bin", NULL, NULL, TS_ERR_IO, "cannot open external data"},
    {"external data, too short", "short.bin", NULL, NULL, TS_ERR_FORMAT,
     "holds 20 bytes, shorter than offset 0 + 24 bytes"},
    {"external data, offset past it", "w.bin", "100", NULL, TS_ERR_FORMAT,
     "shorter than offset 100 + 24 bytes"},
    {"external data, wrong length", "w.bin", NULL, "20", TS_ERR_FORMAT,
     "external data length 20, but its dims need 24 bytes"},
    {"external data, bad offset", "w.bin", "-8", NULL, TS_ERR_FORMAT,
     "external data offset '-8' is not a non-negative integer"},
    {"external data, no location", "", NULL, NULL, TS_ERR_FORMAT,
     "external data without a location"},
    {"external data, a folder", "folder", NULL, NULL, TS_ERR_FORMAT, "is not a regular file"},
    /* a FIFO would block the loader in open() until a writer came */
    {"external data, a FIFO", "fifo", NULL, NULL, TS_ERR_FORMAT, "is not a regular file"},
};

static void test_external(void) {
    write_file("w.bin", w_vals, sizeof w_vals);
    uint8_t padded[8 + sizeof w_vals] = {0};
    memcpy(padded + 8, w_vals, sizeof w_vals);
    write_file("w_at8.bin", padded, sizeof padded);
    write_file("short.bin", w_vals, 20);
    CHECK(mkdir(in_dir("folder"), 0777) == 0);
    CHECK(mkfifo(in_dir("fifo"), 0666) == 0);
    loads("external data", external("w.bin", NULL, NULL), dir);
    loads("external data at an offset", external("w_at8.bin", "8", "24"), dir);
    refused("external data, no folder", external("w.bin", NULL, NULL), NULL, TS_ERR_UNSUPPORTED,
            "external data ('w.bin') needs the model's folder");
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
        const ext_refusal *r = &refusals[i];
        refused(r->what, external(r->loc, r->offset, r->length), dir, r->code, r->frag);
    }
    /* from a file: the model's folder is where the external data is looked up */
    size_t len;
    const uint8_t *buf = pack(external("w.bin", NULL, NULL), &len);
    write_file("model.onnx", buf, len);
    ts_module *m = ts_onnx_load(in_dir("model.onnx"), (ts_onnx_opts){0});
    CHECK(m && runs_right(m));
    CHECK_OK();
    ts_module_free(m);
    arena_free();
    CHECK(!ts_onnx_load(in_dir("absent.onnx"), (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_IO, "absent.onnx");
    CHECK(!ts_onnx_load(in_dir("folder"), (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_IO, "is not a regular file");
    const char *files[] = {"w.bin", "w_at8.bin", "short.bin", "fifo", "model.onnx"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(in_dir(files[i]));
    rmdir(in_dir("folder"));
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tessera_onnx_load_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    printf("refused as they should be:\n");
    test_external();
    rmdir(dir);
    arena_free();
    arena_release();
    return ts_test_finish();
}
#endif
