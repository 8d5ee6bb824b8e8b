/* transform.c — sample transforms: the callback wrapper, Philox draws keyed by (seed, epoch,
 * index), to-tensor, normalize, random crop with padding, random horizontal flip and compose. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/philox.h"
#include "core/clones.h"
#include "core/internal.h"
#include "data/data_internal.h"

struct ts_transform {
    ts_transform_fn fn;
    void *user;
    void (*free_user)(void *);
    /* built-ins make no scope-owned temporaries and skip the scope a user callback runs in */
    bool builtin;
};

/* ------------------------------------------------------------------ randomness */
/* The k-th draw of a sample is one Philox-4x32-10 block under key `seed` (philox.h) with counter
 * {(uint32)index, (uint32)(index >> 32), (uint32)epoch, (uint32)k}: u = u53(word 0, word 1). The
 * loader's shuffle uses k = 0xFFFFFFFF of the same keying (loader.c), which no transform reaches.
 */
double ts_transform_uniform(const ts_transform_ctx *c, int k) {
    if (!c || k < 0) {
        tsi_error_set(TS_ERR_ARG, "transform_uniform: %s", !c ? "ctx is NULL" : "k is negative");
        return NAN;
    }
    uint64_t idx = (uint64_t)c->index;
    uint32_t ctr[4] = {(uint32_t)idx, (uint32_t)(idx >> 32), (uint32_t)c->epoch, (uint32_t)k};
    uint32_t key[2] = {(uint32_t)c->seed, (uint32_t)(c->seed >> 32)}, w[4];
    ts_philox4x32_10(ctr, key, w);
    return ts_philox_u53(w[0], w[1]);
}

/* ------------------------------------------------------------------ the wrapper */
ts_transform *ts_transform_new(ts_transform_fn fn, void *user, void (*free_user)(void *)) {
    tsi_init();
    ts_transform *t = NULL;
    if (!fn)
        tsi_error_set(TS_ERR_ARG, "transform_new: fn is NULL");
    else if (!(t = calloc(1, sizeof *t)))
        tsi_error_set(TS_ERR_OOM, "transform_new: out of host memory");
    if (!t) {
        /* ownership of user passes on the call, so a failed call must not leak it */
        if (free_user) free_user(user);
        return NULL;
    }
    t->fn = fn;
    t->user = user;
    t->free_user = free_user;
    return t;
}

void ts_transform_free(ts_transform *t) {
    if (!t) return;
    if (t->free_user) t->free_user(t->user);
    free(t);
}

ts_tensor *ts_transform_apply(ts_transform *t, ts_tensor *x, const ts_transform_ctx *c) {
    if (!t || !c || !x) {
        if (x || ts_error() == TS_OK)
            tsi_error_set(TS_ERR_ARG, "transform: %s is NULL",
                          !t ? "transform" : (!c ? "ctx" : "input"));
        ts_release(x);
        return NULL;
    }
    if (t->builtin) return t->fn(x, c, t->user);
    /* a user callback may build its result from ops: their temporaries die here, and its result
     * (a reference it holds, e.g. ts_retain of an op's output) outlives the scope */
    ts_scope_begin();
    ts_tensor *y = t->fn(x, c, t->user);
    ts_scope_end();
    if (!y && ts_error() == TS_OK)
        tsi_error_set(TS_ERR_STATE, "transform: the callback returned NULL without an error");
    return y;
}

static ts_transform *builtin_new(ts_transform_fn fn, void *user) {
    ts_transform *t = ts_transform_new(fn, user, free);
    if (t) t->builtin = true;
    return t;
}

/* Releases x and records the error: the tail of every failing built-in. */
static ts_tensor *fail(ts_tensor *x, ts_status code, const char *op, const char *why) {
    tsi_error_set(code, "%s: %s (%s)", op, why, tsi_desc(x));
    ts_release(x);
    return NULL;
}

/* The built-ins read and write host memory directly: samples are cpu tensors. */
static bool host_input(const char *op, ts_tensor *x) {
    if (tsi_device(x).type == TS_CPU) return true;
    tsi_error_set(TS_ERR_DEVICE, "%s: built-in transforms work on cpu tensors, got %s", op,
                  tsi_desc(x));
    return false;
}

/* Takes x and returns a contiguous reference to the same values (x itself when it is). */
static ts_tensor *take_contiguous(const char *op, ts_tensor *x) {
    if (tsi_is_contiguous(x)) return x;
    ts_tensor *c = tsi_contiguous(op, x);
    ts_release(x);
    return c;
}

/* x may be written in place: nobody else can see it or its storage. */
static bool sole_owner(ts_tensor *x) {
    return atomic_load(&x->refs) == 1 && atomic_load(&x->storage->refs) == 1 && !x->is_view &&
           !x->requires_grad && tsi_is_contiguous(x);
}

static inline char *host_ptr(ts_tensor *t) {
    return t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
}

/* ------------------------------------------------------------------ to_tensor */
/* One channel plane of a uint8 image ([hw] pixels ch apart) into float32: torchvision's
 * img.float().div(255), a true f32 division so the values match bit for bit, then `steps`
 * normalize steps (mean / std every TSI_U8_PLAN_CHANNELS floats) as NORMALIZE_LOOP computes them.
 * to_tensor runs it with no steps; the loader's fast path with the plan's. */
TS_CPU_BODY void u8_plane_body(float *restrict o, const uint8_t *restrict s, int64_t hw, int64_t ch,
                               const float *restrict mean, const float *restrict std, int steps) {
    if (ch == 1)
        for (int64_t i = 0; i < hw; i++) o[i] = (float)s[i] / 255.0f;
    else
        for (int64_t i = 0; i < hw; i++) o[i] = (float)s[i * ch] / 255.0f;
    for (int k = 0; k < steps; k++) {
        const float m = mean[k * TSI_U8_PLAN_CHANNELS], sd = std[k * TSI_U8_PLAN_CHANNELS];
        for (int64_t i = 0; i < hw; i++) o[i] = (o[i] - m) / sd;
    }
}
TS_CPU_VARIANTS(u8_plane,
                (float *restrict o, const uint8_t *restrict s, int64_t hw, int64_t ch,
                 const float *restrict mean, const float *restrict std, int steps),
                (o, s, hw, ch, mean, std, steps))

static ts_tensor *to_tensor_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    const char *op = "to_tensor";
    if (!host_input(op, x)) return ts_release(x), NULL;
    if (x->dtype != TS_U8) {
        ts_tensor *y = tsi_cast(op, x, TS_F32);
        ts_release(x);
        return y;
    }
    const int nd = x->shape.ndim;
    if (nd != 2 && nd != 3)
        return fail(x, TS_ERR_SHAPE, op, "expected a uint8 image [H, W] or [H, W, C]");
    const int64_t h = x->shape.dims[0], w = x->shape.dims[1], ch = nd == 3 ? x->shape.dims[2] : 1;
    if (!(x = take_contiguous(op, x))) return NULL;
    ts_tensor *y = tsi_new(op, TS_SHAPE(ch, h, w), TS_F32, ts_cpu());
    if (y) {
        const uint8_t *s = (const uint8_t *)host_ptr(x);
        float *o = (float *)host_ptr(y);
        const int64_t hw = h * w;
        for (int64_t cc = 0; cc < ch; cc++) u8_plane(o + cc * hw, s + cc, hw, ch, NULL, NULL, 0);
    }
    ts_release(x);
    return y;
}

ts_transform *ts_to_tensor(void) {
    tsi_init();
    return builtin_new(to_tensor_fn, NULL);
}

/* ------------------------------------------------------------------ normalize */
typedef struct normalize_params {
    int channels;
    float mean[]; /* channels means, then channels stds */
} normalize_params;

#define NORMALIZE_LOOP(T)                                                                          \
    do {                                                                                           \
        const T *s = (const T *)host_ptr(x);                                                       \
        T *o = (T *)host_ptr(y);                                                                   \
        for (int64_t cc = 0; cc < planes; cc++) {                                                  \
            const T m = (T)p->mean[per ? cc : 0], sd = (T)p->mean[p->channels + (per ? cc : 0)];   \
            const T *sc = s + cc * inner;                                                          \
            T *oc = o + cc * inner;                                                                \
            for (int64_t i = 0; i < inner; i++) oc[i] = (sc[i] - m) / sd;                          \
        }                                                                                          \
    } while (0)

static ts_tensor *normalize_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    const char *op = "normalize";
    const normalize_params *p = user;
    if (!host_input(op, x)) return ts_release(x), NULL;
    if (x->dtype != TS_F32 && x->dtype != TS_F64)
        return fail(x, TS_ERR_DTYPE, op,
                    "expected a float32 or float64 tensor (ts_to_tensor converts images)");
    /* one mean and std broadcast over everything, or one per entry of dim 0 (the channels) */
    const bool per = p->channels > 1;
    if (per && (x->shape.ndim < 1 || x->shape.dims[0] != p->channels)) {
        tsi_error_set(TS_ERR_SHAPE, "%s: expected %d channels in dim 0, got %s", op, p->channels,
                      tsi_desc(x));
        ts_release(x);
        return NULL;
    }
    const int64_t n = tsi_numel(x->shape);
    const int64_t planes = per ? p->channels : 1, inner = per ? n / planes : n;
    ts_tensor *y;
    if (sole_owner(x)) {
        y = ts_retain(x); /* a fresh sample (to_tensor's output): no second buffer needed */
    } else {
        if (!(x = take_contiguous(op, x))) return NULL;
        y = tsi_new(op, x->shape, x->dtype, ts_cpu());
    }
    if (y) {
        /* torchvision's tensor.sub_(mean).div_(std), in the tensor's dtype */
        if (x->dtype == TS_F32)
            NORMALIZE_LOOP(float);
        else
            NORMALIZE_LOOP(double);
        tsi_bump_version(y);
    }
    ts_release(x);
    return y;
}

ts_transform *ts_normalize(int channels, const float *mean, const float *std) {
    tsi_init();
    if (channels < 1 || !mean || !std) {
        tsi_error_set(TS_ERR_ARG, "normalize: %s",
                      channels < 1 ? "channels must be at least 1" : "mean or std is NULL");
        return NULL;
    }
    for (int i = 0; i < channels; i++) {
        if (std[i] == 0.0f || isnan(std[i])) {
            tsi_error_set(TS_ERR_ARG, "normalize: std[%d] is %g; a zero std would divide by zero",
                          i, (double)std[i]);
            return NULL;
        }
    }
    normalize_params *p = malloc(sizeof *p + 2 * (size_t)channels * sizeof(float));
    if (!p) {
        tsi_error_set(TS_ERR_OOM, "normalize: out of host memory");
        return NULL;
    }
    p->channels = channels;
    memcpy(p->mean, mean, (size_t)channels * sizeof(float));
    memcpy(p->mean + channels, std, (size_t)channels * sizeof(float));
    return builtin_new(normalize_fn, p);
}

ts_transform *ts_normalize3(float m0, float m1, float m2, float s0, float s1, float s2) {
    return ts_normalize_new(3, (const float[]){m0, m1, m2}, (const float[]){s0, s1, s2});
}

/* ------------------------------------------------------------------ image geometry */
/* An image as planes of h rows of w pixels of `pix` bytes: CHW has C planes of one-element pixels,
 * HWC-u8 one plane of C-byte pixels, HW one plane. */
typedef struct image {
    int64_t planes, h, w, pix;
    bool hwc;
} image;

static bool image_of(const char *op, ts_tensor *x, image *im) {
    const int nd = x->shape.ndim;
    const int64_t *d = x->shape.dims;
    const int64_t es = (int64_t)tsi_dtype_size(x->dtype);
    if (nd == 2) {
        *im = (image){1, d[0], d[1], es, false};
    } else if (nd == 3 && x->dtype == TS_U8) {
        *im = (image){1, d[0], d[1], d[2] * es, true};
    } else if (nd == 3) {
        *im = (image){d[0], d[1], d[2], es, false};
    } else {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: expected an image [C, H, W], [H, W, C] (uint8) or [H, W], "
                      "got %s",
                      op, tsi_desc(x));
        return false;
    }
    return true;
}

static ts_shape image_shape(const image *im, ts_tensor *x, int64_t h, int64_t w) {
    if (x->shape.ndim == 2) return TS_SHAPE(h, w);
    return im->hwc ? TS_SHAPE(h, w, x->shape.dims[2]) : TS_SHAPE(x->shape.dims[0], h, w);
}

/* ------------------------------------------------------------------ random crop */
typedef struct crop_params {
    int size, padding;
} crop_params;

static ts_tensor *crop_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    const char *op = "random_crop";
    const crop_params *p = user;
    image im;
    if (!host_input(op, x) || !image_of(op, x, &im)) return ts_release(x), NULL;
    const int64_t size = p->size, pad = p->padding;
    const int64_t ph = im.h + 2 * pad, pw = im.w + 2 * pad;
    if (size > ph || size > pw) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: crop size %lld is larger than the padded image %lldx%lld (%s)", op,
                      (long long)size, (long long)ph, (long long)pw, tsi_desc(x));
        ts_release(x);
        return NULL;
    }
    /* draw even when the crop is the whole image, so the stream does not depend on the size */
    int64_t top = (int64_t)(ts_transform_uniform(c, 0) * (double)(ph - size + 1));
    int64_t left = (int64_t)(ts_transform_uniform(c, 1) * (double)(pw - size + 1));
    if (pad == 0 && size == im.h && size == im.w) return x;
    if (!(x = take_contiguous(op, x))) return NULL;
    ts_tensor *y = tsi_new(op, image_shape(&im, x, size, size), x->dtype, ts_cpu());
    if (y) {
        const char *s = host_ptr(x);
        char *o = host_ptr(y);
        const int64_t pix = im.pix, row = size * pix;
        /* output columns [c0, c1) come from the image; the rest is padding */
        int64_t c0 = pad - left, c1 = im.w + pad - left;
        c0 = c0 < 0 ? 0 : (c0 > size ? size : c0);
        c1 = c1 < c0 ? c0 : (c1 > size ? size : c1);
        for (int64_t pl = 0; pl < im.planes; pl++) {
            const char *sp = s + pl * im.h * im.w * pix;
            char *op_ = o + pl * size * row;
            for (int64_t r = 0; r < size; r++) {
                char *orow = op_ + r * row;
                const int64_t sr = top + r - pad;
                if (sr < 0 || sr >= im.h) {
                    memset(orow, 0, (size_t)row);
                    continue;
                }
                memset(orow, 0, (size_t)(c0 * pix));
                if (c1 > c0)
                    memcpy(orow + c0 * pix, sp + (sr * im.w + c0 + left - pad) * pix,
                           (size_t)((c1 - c0) * pix));
                memset(orow + c1 * pix, 0, (size_t)((size - c1) * pix));
            }
        }
    }
    ts_release(x);
    return y;
}

ts_transform *ts_random_crop(int size, int padding) {
    tsi_init();
    if (size < 1 || padding < 0) {
        tsi_error_set(TS_ERR_ARG,
                      "random_crop: size must be positive and padding non-negative, "
                      "got size %d, padding %d",
                      size, padding);
        return NULL;
    }
    crop_params *p = malloc(sizeof *p);
    if (!p) {
        tsi_error_set(TS_ERR_OOM, "random_crop: out of host memory");
        return NULL;
    }
    *p = (crop_params){size, padding};
    return builtin_new(crop_fn, p);
}

/* ------------------------------------------------------------------ random horizontal flip */
static ts_tensor *hflip_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    const char *op = "random_hflip";
    const double p = *(const double *)user;
    image im;
    if (!host_input(op, x) || !image_of(op, x, &im)) return ts_release(x), NULL;
    if (!(ts_transform_uniform(c, 0) < p)) return x;
    if (!(x = take_contiguous(op, x))) return NULL;
    char tmp[64];
    /* the swaps below read both ends before writing, so they may work in place */
    const bool inplace = sole_owner(x) && im.pix <= (int64_t)sizeof tmp;
    ts_tensor *y = inplace ? ts_retain(x) : tsi_new(op, x->shape, x->dtype, ts_cpu());
    if (y) {
        char *s = host_ptr(x), *o = host_ptr(y);
        const int64_t pix = im.pix, rows = im.planes * im.h, w = im.w;
        for (int64_t r = 0; r < rows; r++) {
            char *sr = s + r * w * pix, *orow = o + r * w * pix;
            if (pix == 4 && tsi_dtype_size(x->dtype) == 4) { /* f32 CHW: aligned 4-byte words */
                uint32_t *a = (uint32_t *)sr, *b = (uint32_t *)orow;
                for (int64_t i = 0, j = w - 1; i <= j; i++, j--) {
                    uint32_t t0 = a[i], t1 = a[j];
                    b[i] = t1;
                    b[j] = t0;
                }
            } else if (pix <= (int64_t)sizeof tmp) {
                for (int64_t i = 0, j = w - 1; i <= j; i++, j--) {
                    memcpy(tmp, sr + i * pix, (size_t)pix);
                    memmove(orow + i * pix, sr + j * pix, (size_t)pix);
                    memcpy(orow + j * pix, tmp, (size_t)pix);
                }
            } else {
                for (int64_t i = 0; i < w; i++) /* wide pixels: y is new, nothing aliases */
                    memcpy(orow + i * pix, sr + (w - 1 - i) * pix, (size_t)pix);
            }
        }
        tsi_bump_version(y);
    }
    ts_release(x);
    return y;
}

ts_transform *ts_random_hflip(double p) {
    tsi_init();
    if (!(p >= 0.0 && p <= 1.0)) {
        tsi_error_set(TS_ERR_ARG, "random_hflip: p must be in [0, 1], got %g", p);
        return NULL;
    }
    double *u = malloc(sizeof *u);
    if (!u) {
        tsi_error_set(TS_ERR_OOM, "random_hflip: out of host memory");
        return NULL;
    }
    *u = p;
    return builtin_new(hflip_fn, u);
}

/* ------------------------------------------------------------------ compose */
typedef struct compose_params {
    int n;
    ts_transform *ts[];
} compose_params;

/* Child i draws under seed + i * golden ratio, so a crop and a flip in one compose (both reading
 * draw 0) stay independent; child 0 sees the caller's key unchanged. */
#define COMPOSE_SEED_STEP 0x9E3779B97F4A7C15ULL

static ts_tensor *compose_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    const compose_params *p = user;
    for (int i = 0; i < p->n && x; i++) {
        ts_transform_ctx ci = *c;
        ci.seed = c->seed + (uint64_t)i * COMPOSE_SEED_STEP;
        x = ts_transform_apply(p->ts[i], x, &ci);
    }
    return x;
}

static void compose_free(void *user) {
    compose_params *p = user;
    for (int i = 0; i < p->n; i++) ts_transform_free(p->ts[i]);
    free(p);
}

ts_transform *ts_compose(int n, ts_transform *const *ts) {
    tsi_init();
    bool ok = n >= 0 && (n == 0 || ts);
    for (int i = 0; ok && i < n; i++) ok = ts[i] != NULL;
    compose_params *p = ok ? malloc(sizeof *p + (size_t)n * sizeof(ts_transform *)) : NULL;
    if (!p) {
        /* ownership passes on the call: free what was given */
        if (ts && n > 0)
            for (int i = 0; i < n; i++) ts_transform_free(ts[i]);
        if (!ok)
            tsi_error_set(TS_ERR_ARG, "compose: %s",
                          n < 0 ? "n is negative" : "a transform is NULL");
        else
            tsi_error_set(TS_ERR_OOM, "compose: out of host memory");
        return NULL;
    }
    p->n = n;
    if (n > 0) memcpy(p->ts, ts, (size_t)n * sizeof(ts_transform *));
    ts_transform *t = ts_transform_new(compose_fn, p, compose_free);
    if (t) t->builtin = true;
    return t;
}

/* ------------------------------------------------------------------ the loader's plan */
/* Appends the steps of t to steps (composes flattened); false on a step that is not to_tensor or
 * normalize, or on more than max steps. */
static bool plan_steps(const ts_transform *t, const ts_transform **steps, int *n, int max) {
    if (t->fn == compose_fn) {
        const compose_params *p = t->user;
        for (int i = 0; i < p->n; i++)
            if (!plan_steps(p->ts[i], steps, n, max)) return false;
        return true;
    }
    if ((t->fn != to_tensor_fn && t->fn != normalize_fn) || *n >= max) return false;
    steps[(*n)++] = t;
    return true;
}

bool tsi_transform_u8_plan(const ts_transform *t, int64_t channels, tsi_u8_plan *out) {
    const ts_transform *steps[TSI_U8_PLAN_STEPS + 1];
    int n = 0;
    if (!t || channels < 1 || channels > TSI_U8_PLAN_CHANNELS ||
        !plan_steps(t, steps, &n, TSI_U8_PLAN_STEPS + 1) || n == 0 || steps[0]->fn != to_tensor_fn)
        return false;
    out->steps = n - 1;
    for (int i = 1; i < n; i++) {
        const normalize_params *p = steps[i]->user;
        if (steps[i]->fn != normalize_fn || (p->channels > 1 && p->channels != channels))
            return false;
        for (int64_t c = 0; c < channels; c++) {
            const int k = p->channels > 1 ? (int)c : 0;
            out->mean[i - 1][c] = p->mean[k];
            out->std[i - 1][c] = p->mean[p->channels + k];
        }
    }
    return true;
}

void tsi_u8_plan_apply(const tsi_u8_plan *p, const uint8_t *src, int64_t hw, int64_t ch,
                       float *dst) {
    for (int64_t c = 0; c < ch; c++)
        u8_plane(dst + c * hw, src + c, hw, ch, &p->mean[0][c], &p->std[0][c], p->steps);
}
