/* image_folder.c — root/<class>/<image> datasets decoded by stb_image (Debian's libstb-dev);
 * without it, ts_image_folder says the build cannot read images. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/data_internal.h"

#ifndef TS_HAVE_STB

ts_dataset *ts_image_folder(const char *root) {
    return tsi_error_set(TS_ERR_UNSUPPORTED,
                         "ts_image_folder: %s: this build of Tessera has no image library; "
                         "install Debian's libstb-dev and rebuild",
                         root ? root : "(null)"),
           NULL;
}

#else
#include <stb/stb_image.h>

/* Decoding more than this per image is refused: a small file can claim a huge canvas. */
#define MAX_IMAGE_BYTES ((uint64_t)1 << 28)

typedef struct image_ds {
    char **paths; /* sorted by class, then by name */
    int64_t *labels;
    int64_t n;
    int channels; /* of the first image: every sample is converted to it, so batches stack */
} image_ds;

static int64_t image_len(void *ctx) { return ((image_ds *)ctx)->n; }

static ts_status image_get(void *ctx, int64_t i, ts_sample *out) {
    image_ds *d = ctx;
    const char *path = d->paths[i];
    FILE *f = fopen(path, "rb");
    if (!f) return tsi_error_set(TS_ERR_IO, "%s: %s", path, strerror(errno));
    int w, h, c;
    if (!stbi_info_from_file(f, &w, &h, &c)) {
        fclose(f);
        return tsi_error_set(TS_ERR_FORMAT, "%s: not an image stb_image can read (%s)", path,
                             stbi_failure_reason());
    }
    if ((uint64_t)w * (uint64_t)h * (uint64_t)d->channels > MAX_IMAGE_BYTES) {
        fclose(f);
        return tsi_error_set(TS_ERR_FORMAT, "%s: %d x %d pixels is too large to decode", path, w,
                             h);
    }
    uint8_t *px = stbi_load_from_file(f, &w, &h, &c, d->channels);
    fclose(f);
    if (!px)
        return tsi_error_set(TS_ERR_FORMAT, "%s: cannot decode (%s)", path, stbi_failure_reason());
    out->x = tsi_sample_tensor("image folder", TS_SHAPE(h, w, d->channels), TS_U8, px);
    stbi_image_free(px);
    out->y = tsi_sample_label("image folder", d->labels[i]);
    return out->x && out->y ? TS_OK : ts_error();
}

static void image_free(void *ctx) {
    image_ds *d = ctx;
    for (int64_t i = 0; i < d->n; i++) free(d->paths[i]);
    free(d->paths);
    free(d->labels);
    free(d);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image(const char *name) {
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".bmp", ".gif",
                                      ".tga", ".pgm", ".ppm",  ".pnm", ".psd"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i])) return true;
    return false;
}

/* Sorted names of the entries of dir that are folders (want_dirs) or image files. */
static char **list_dir(const char *dir, bool want_dirs, int *count) {
    *count = 0;
    DIR *dp = opendir(dir);
    if (!dp) return tsi_error_set(TS_ERR_IO, "%s: %s", dir, strerror(errno)), NULL;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        struct stat sb;
        int k = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (k < 0 || (size_t)k >= sizeof path || stat(path, &sb) != 0) continue;
        bool ok = want_dirs ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode) && is_image(de->d_name);
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **m = realloc(names, (size_t)cap * sizeof *m);
            if (!m) goto oom;
            names = m;
        }
        if (!(names[n] = strdup(de->d_name))) goto oom;
        n++;
    }
    closedir(dp);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    if (!names && !(names = calloc(1, sizeof *names))) /* an empty list is not an error */
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory listing the folder", dir);
    return names;
oom:
    closedir(dp);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return tsi_error_set(TS_ERR_OOM, "%s: out of host memory listing the folder", dir), NULL;
}

static void free_names(char **names, int n) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

ts_dataset *ts_image_folder(const char *root) {
    if (!root) return tsi_error_set(TS_ERR_ARG, "ts_image_folder: root is NULL"), NULL;
    int nclass;
    char **classes = list_dir(root, true, &nclass);
    if (!classes) return NULL;
    image_ds *d = calloc(1, sizeof *d);
    int64_t cap = 0;
    if (!d) {
        free_names(classes, nclass);
        return tsi_error_set(TS_ERR_OOM, "ts_image_folder: out of host memory"), NULL;
    }
    if (nclass == 0) {
        tsi_error_set(TS_ERR_FORMAT, "%s: no class folders (expected %s/<class>/<image>)", root,
                      root);
        goto fail;
    }
    for (int c = 0; c < nclass; c++) {
        char dir[4096];
        int k = snprintf(dir, sizeof dir, "%s/%s", root, classes[c]), nimg;
        if (k < 0 || (size_t)k >= sizeof dir) {
            tsi_error_set(TS_ERR_ARG, "ts_image_folder: path too long: %s/%s", root, classes[c]);
            goto fail;
        }
        char **imgs = list_dir(dir, false, &nimg);
        if (!imgs) goto fail;
        if (nimg == 0) {
            free_names(imgs, 0);
            tsi_error_set(TS_ERR_FORMAT, "%s: no images (png, jpg, bmp, gif, tga, pnm or psd)",
                          dir);
            goto fail;
        }
        for (int i = 0; i < nimg; i++) {
            if (d->n == cap) {
                cap = cap ? 2 * cap : 64;
                char **p = realloc(d->paths, (size_t)cap * sizeof *p);
                if (p) d->paths = p;
                int64_t *l = p ? realloc(d->labels, (size_t)cap * sizeof *l) : NULL;
                if (l) d->labels = l;
                if (!p || !l) {
                    free_names(imgs, nimg);
                    tsi_error_set(TS_ERR_OOM, "ts_image_folder: out of host memory");
                    goto fail;
                }
            }
            size_t len = strlen(dir) + strlen(imgs[i]) + 2;
            if (!(d->paths[d->n] = malloc(len))) {
                free_names(imgs, nimg);
                tsi_error_set(TS_ERR_OOM, "ts_image_folder: out of host memory");
                goto fail;
            }
            snprintf(d->paths[d->n], len, "%s/%s", dir, imgs[i]);
            d->labels[d->n++] = c;
        }
        free_names(imgs, nimg);
    }
    int w, h, ch;
    if (!stbi_info(d->paths[0], &w, &h, &ch)) {
        tsi_error_set(TS_ERR_FORMAT, "%s: not an image stb_image can read (%s)", d->paths[0],
                      stbi_failure_reason());
        goto fail;
    }
    d->channels = ch;
    free_names(classes, nclass);
    static const ts_dataset_ops ops = {.len = image_len, .get = image_get, .free = image_free};
    ts_dataset *ds = ts_dataset_new(&ops, d);
    ts_dataset_set_num_classes(ds, nclass);
    return ds;
fail:
    free_names(classes, nclass);
    image_free(d);
    return NULL;
}

#endif /* TS_HAVE_STB */
