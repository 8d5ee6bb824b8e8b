/* test_image_png.c — ts_image_save_png: PNG round trips through ts_image_read / ts_image_decode
 * (stb_image) for grey [H,W], [1,H,W], RGB and RGBA, strided and sim-device inputs; the file's
 * signature; every refused dtype, rank and channel count; unwritable paths and bad images. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/image.h"
#include "ts_test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

/* A uint8 tensor whose byte at flat index i is (i * 37 + 11) mod 256. */
static ts_tensor *pattern(ts_shape s, ts_device dev) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    unsigned char *b = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) b[i] = (unsigned char)((i * 37 + 11) % 256);
    ts_tensor *t = ts_from_data(s, TS_U8, b, (ts_opts){.device = dev});
    free(b);
    return t;
}

/* Both tensors' bytes (same shape, cpu copies) are equal. */
static bool same_bytes(ts_tensor *a, ts_tensor *b) {
    if (ts_numel(a) != ts_numel(b) || ts_ndim(a) != ts_ndim(b)) return false;
    for (int i = 0; i < ts_ndim(a); i++)
        if (ts_size(a, i) != ts_size(b, i)) return false;
    size_t n = (size_t)ts_numel(a);
    unsigned char *x = malloc(n), *y = malloc(n);
    ts_tensor *ca = ts_contiguous(a), *cb = ts_contiguous(b);
    bool ok = ts_copy_to_host(ca, x, n) == TS_OK && ts_copy_to_host(cb, y, n) == TS_OK &&
              memcmp(x, y, n) == 0;
    ts_release(ca);
    ts_release(cb);
    free(x);
    free(y);
    return ok;
}

static void round_trip(const char *name, ts_tensor *t, int channels_back) {
    CHECK_EQ(ts_image_save_png(tmp_path(name), t), TS_OK);
    CHECK_OK();
    ts_tensor *back = ts_image_read(tmp_path(name), 0);
    CHECK(back != NULL);
    CHECK_EQ(ts_size(back, 0), channels_back);
    ts_tensor *want = ts_ndim(t) == 2 ? ts_unsqueeze(t, 0) : ts_retain(t);
    CHECK(back && same_bytes(back, want));
    /* the file's first 8 bytes are the PNG signature */
    unsigned char sig[8] = {0};
    FILE *f = fopen(tmp_path(name), "rb");
    CHECK(f && fread(sig, 1, 8, f) == 8);
    if (f) fclose(f);
    CHECK(memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0);
    ts_release(want);
    ts_release(back);
}

static void test_round_trips(void) {
    ts_tensor *g = pattern(TS_SHAPE(5, 7), ts_cpu());
    round_trip("g.png", g, 1);
    ts_tensor *g1 = pattern(TS_SHAPE(1, 6, 3), ts_cpu());
    round_trip("g1.png", g1, 1);
    ts_tensor *rgb = pattern(TS_SHAPE(3, 4, 9), ts_cpu());
    round_trip("rgb.png", rgb, 3);
    ts_tensor *rgba = pattern(TS_SHAPE(4, 8, 2), ts_cpu());
    round_trip("rgba.png", rgba, 4);
    /* strided: a transposed view writes its logical layout */
    ts_tensor *tr = ts_transpose(rgb, 1, 2);
    round_trip("tr.png", tr, 3);
    /* another device */
    ts_tensor *sim = pattern(TS_SHAPE(3, 3, 5), ts_sim(0));
    round_trip("sim.png", sim, 3);
    /* decode from memory, with a channel conversion */
    FILE *f = fopen(tmp_path("rgb.png"), "rb");
    unsigned char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    ts_tensor *d = ts_image_decode(buf, n, 4);
    CHECK(d && ts_size(d, 0) == 4 && ts_size(d, 1) == 4 && ts_size(d, 2) == 9);
    ts_tensor *rgb_d = d ? ts_narrow(d, 0, 0, 3) : NULL;
    CHECK(rgb_d && same_bytes(rgb_d, rgb));
    ts_release(rgb_d);
    ts_release(d);
    ts_release(sim);
    ts_release(tr);
    ts_release(rgba);
    ts_release(rgb);
    ts_release(g1);
    ts_release(g);
}

static void test_errors(void) {
    ts_tensor *f32 = ts_zeros(TS_SHAPE(3, 4, 4), (ts_opts){0});
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), f32), TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "must be uint8, got float32");
    ts_tensor *c2 = pattern(TS_SHAPE(2, 4, 4), ts_cpu());
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), c2), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "C must be 1, 3 or 4");
    ts_tensor *r4 = pattern(TS_SHAPE(1, 3, 4, 4), ts_cpu());
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), r4), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "got 4 dims");
    ts_tensor *r1 = pattern(TS_SHAPE(4), ts_cpu());
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), r1), TS_ERR_SHAPE);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *empty = pattern(TS_SHAPE(3, 0, 4), ts_cpu());
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), empty), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "0 x 4");
    CHECK_EQ(ts_image_save_png(tmp_path("e.png"), NULL), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *ok = pattern(TS_SHAPE(3, 2, 2), ts_cpu());
    CHECK_EQ(ts_image_save_png(NULL, ok), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "path is NULL");
    CHECK_EQ(ts_image_save_png(tmp_path("no/such/folder.png"), ok), TS_ERR_IO);
    CHECK_ERR_HAS(TS_ERR_IO, "cannot write");
    CHECK(access(tmp_path("e.png"), F_OK) != 0); /* no refused call wrote anything */
    /* reading */
    CHECK(ts_image_read(tmp_path("missing.png"), 0) == NULL);
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_image_read(tmp_path("x.png"), 5) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "channels");
    CHECK(ts_image_decode("not an image", 12, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "not an image");
    ts_release(ok);
    ts_release(empty);
    ts_release(r1);
    ts_release(r4);
    ts_release(c2);
    ts_release(f32);
}

int main(void) {
#ifndef TS_HAVE_STB
    return ts_test_skip("built without stb_image (libstb-dev)");
#else
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("needs TS_SIM_DEVICES >= 1");
    snprintf(dir, sizeof dir, "/tmp/ts_png_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    test_round_trips();
    test_errors();
    const char *names[] = {"g.png", "g1.png", "rgb.png", "rgba.png", "tr.png", "sim.png"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) remove(tmp_path(names[i]));
    rmdir(dir);
    return ts_test_finish();
#endif
}
