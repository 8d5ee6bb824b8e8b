/* image_png.c — ts_image_save_png (stb_image_write) and ts_image_read/decode (stb_image). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tessera/image.h"

#ifndef TS_HAVE_STB

static ts_status no_stb(const char *op) {
    return tsi_error_set(TS_ERR_UNSUPPORTED,
                         "%s: this build of Tessera has no image library; install Debian's "
                         "libstb-dev and rebuild",
                         op);
}
ts_status ts_image_save_png(const char *path, ts_tensor *t) {
    (void)path, (void)t;
    return no_stb("image_save_png");
}
ts_tensor *ts_image_read(const char *path, int channels) {
    (void)path, (void)channels;
    return no_stb("image_read"), NULL;
}
ts_tensor *ts_image_decode(const void *data, size_t nbytes, int channels) {
    (void)data, (void)nbytes, (void)channels;
    return no_stb("image_decode"), NULL;
}

#else
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

/* Decoding more than this per image is refused: a small file can claim a huge canvas. */
#define MAX_IMAGE_BYTES ((uint64_t)1 << 28)

ts_status ts_image_save_png(const char *path, ts_tensor *t) {
    const char *op = "image_save_png";
    tsi_init();
    if (!tsi_check_input(op, t, "tensor")) return ts_error();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op);
    if (ts_dtype_of(t) != TS_U8)
        return tsi_error_set(TS_ERR_DTYPE, "%s: tensor must be uint8, got %s", op,
                             ts_dtype_name(ts_dtype_of(t)));
    int nd = ts_ndim(t);
    if (nd != 2 && nd != 3)
        return tsi_error_set(TS_ERR_SHAPE, "%s: tensor must be [C,H,W] or [H,W], got %d dims", op,
                             nd);
    int64_t c = nd == 3 ? ts_size(t, 0) : 1, h = ts_size(t, -2), w = ts_size(t, -1);
    if (c != 1 && c != 3 && c != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: C must be 1, 3 or 4 (grey, RGB, RGBA), got %lld",
                             op, (long long)c);
    if (h < 1 || w < 1 || h > INT32_MAX / 4 || w > INT32_MAX / 4 / c ||
        (uint64_t)h * (uint64_t)w * (uint64_t)c > MAX_IMAGE_BYTES)
        return tsi_error_set(TS_ERR_SHAPE, "%s: cannot write a %lld x %lld image", op, (long long)h,
                             (long long)w);
    /* to interleaved [H,W,C] bytes on the host */
    ts_tensor *hwc = nd == 3 ? ts_permute(t, TS_DIMS(1, 2, 0)) : ts_retain(t);
    ts_tensor *dense = hwc ? ts_contiguous(hwc) : NULL;
    ts_release(hwc);
    if (!dense) return ts_error();
    size_t n = (size_t)(h * w * c);
    unsigned char *px = malloc(n);
    ts_status st = px ? ts_copy_to_host(dense, px, n)
                      : tsi_error_set(TS_ERR_OOM, "%s: out of memory for %zu bytes", op, n);
    ts_release(dense);
    errno = 0;
    if (st == TS_OK && !stbi_write_png(path, (int)w, (int)h, (int)c, px, (int)(w * c)))
        st = tsi_error_set(TS_ERR_IO, "%s: cannot write '%s'%s%s", op, path, errno ? ": " : "",
                           errno ? strerror(errno) : "");
    free(px);
    return st;
}

static ts_tensor *to_chw(const char *op, unsigned char *px, int w, int h, int c) {
    if (!px)
        return tsi_error_set(TS_ERR_FORMAT, "%s: cannot decode (%s)", op, stbi_failure_reason()),
               NULL;
    ts_tensor *hwc = ts_from_data(TS_SHAPE(h, w, c), TS_U8, px, (ts_opts){.device = ts_cpu()});
    stbi_image_free(px);
    if (!hwc) return NULL;
    ts_tensor *p = ts_permute(hwc, TS_DIMS(2, 0, 1));
    ts_release(hwc);
    ts_tensor *r = p ? ts_contiguous(p) : NULL;
    ts_release(p);
    return r;
}

static bool check_channels(const char *op, int channels) {
    if (channels >= 0 && channels <= 4) return true;
    tsi_error_set(TS_ERR_ARG, "%s: channels must be 0 (as stored) or 1..4, got %d", op, channels);
    return false;
}

ts_tensor *ts_image_read(const char *path, int channels) {
    const char *op = "image_read";
    tsi_init();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op), NULL;
    if (!check_channels(op, channels)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tsi_error_set(TS_ERR_IO, "%s: %s: %s", op, path, strerror(errno)), NULL;
    int w, h, c;
    if (!stbi_info_from_file(f, &w, &h, &c)) {
        fclose(f);
        return tsi_error_set(TS_ERR_FORMAT, "%s: %s: not an image stb_image can read (%s)", op,
                             path, stbi_failure_reason()),
               NULL;
    }
    int want = channels ? channels : c;
    if ((uint64_t)w * (uint64_t)h * (uint64_t)want > MAX_IMAGE_BYTES) {
        fclose(f);
        return tsi_error_set(TS_ERR_FORMAT, "%s: %s: %d x %d pixels is too large", op, path, w, h),
               NULL;
    }
    unsigned char *px = stbi_load_from_file(f, &w, &h, &c, want);
    fclose(f);
    return to_chw(op, px, w, h, want);
}

ts_tensor *ts_image_decode(const void *data, size_t nbytes, int channels) {
    const char *op = "image_decode";
    tsi_init();
    if (!data) return tsi_error_set(TS_ERR_ARG, "%s: data is NULL", op), NULL;
    if (nbytes > INT32_MAX)
        return tsi_error_set(TS_ERR_ARG, "%s: %zu bytes is too large", op, nbytes), NULL;
    if (!check_channels(op, channels)) return NULL;
    int w, h, c;
    if (!stbi_info_from_memory(data, (int)nbytes, &w, &h, &c))
        return tsi_error_set(TS_ERR_FORMAT, "%s: not an image stb_image can read (%s)", op,
                             stbi_failure_reason()),
               NULL;
    int want = channels ? channels : c;
    if ((uint64_t)w * (uint64_t)h * (uint64_t)want > MAX_IMAGE_BYTES)
        return tsi_error_set(TS_ERR_FORMAT, "%s: %d x %d pixels is too large", op, w, h), NULL;
    unsigned char *px = stbi_load_from_memory(data, (int)nbytes, &w, &h, &c, want);
    return to_chw(op, px, w, h, want);
}
#endif
