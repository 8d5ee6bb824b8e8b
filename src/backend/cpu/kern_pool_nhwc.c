/* kern_pool_nhwc.c — pool2d and its backward on channels_last activations (backend.h's
 * pool2d_channels_last): x, out, gx, gout and the max indices are NHWC-dense views, and each
 * output pixel's window is walked over runs of contiguous channels, so nothing is transposed to
 * NCHW planes and back (a ResNet's stem max pool was a third of its bf16 inference that way).
 * Per channel the windows, the order of the sums and the roundings are kern_pool.c's
 * (kern_pool_geom.h), so both layouts give the same bits; a max is its winner's bits, as the 2x2
 * plane kernels select them. Half inputs are widened a run at a time (the vec kernels). */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_pool_geom.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

/* channels per run: the accumulators and the widened inputs of one run stay in L1 */
enum { RUN = 256 };

static atomic_uint_fast64_t calls;

uint64_t tsi_pool_nhwc_count(void) { return atomic_load(&calls); }

bool tsi_cpu_pool2d_channels_last(const ts_backend *be, int index, ts_dtype dt) {
    (void)be, (void)index;
    return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16;
}

bool tsi_pool_view_nhwc(const ts_kview *v) {
    return v->ndim == 4 && v->shape[1] > 1 && v->strides[1] == 1 && v->strides[3] == v->shape[1] &&
           v->strides[2] == v->shape[3] * v->shape[1] &&
           v->strides[0] == v->shape[2] * v->strides[2];
}

typedef struct nhwc {
    pgeom g;
    int64_t n, c;
    ts_dtype dt;
    size_t es;
} nhwc;

static nhwc nhwc_of(const ts_kview *x, const ts_kview *y, const ts_pool2d_params *p) {
    nhwc a = {.g = pgeom_of(x, y, p), .n = x->shape[0], .c = x->shape[1], .dt = x->dtype};
    a.es = a.dt == TS_F64 ? 8 : a.dt == TS_F32 ? 4 : 2;
    return a;
}

static bool parallel_worth(double work, int64_t tasks) {
#ifdef TS_HAVE_OPENMP
    return tasks > 1 && work > 32768 && omp_get_max_threads() > 1 && !omp_in_parallel();
#else
    (void)work, (void)tasks;
    return false;
#endif
}

/* ------------------------------------------------------------------ float32 and halves */
/* m channels at p (a pixel's run) as floats: p itself for float32, else widened into buf */
static const float *run_f32(const nhwc *a, const char *p, int64_t m, float *buf) {
    if (a->dt == TS_F32) return (const float *)p;
    ts_vec_load_f32(tsi_vec_kernels_get(), buf, p, a->dt, 2, m);
    return buf;
}

static void store_f32(const nhwc *a, char *p, const float *v, int64_t m) {
    if (a->dt == TS_F32)
        memcpy(p, v, (size_t)m * sizeof *v);
    else
        ts_vec_store_f32(tsi_vec_kernels_get(), p, a->dt, 2, v, m);
}

/* The running max of one tap's run v into acc, with the tap's flat index q into best where it
 * wins (NaN wins, ties keep the first): selects on local arrays, which the compiler vectorizes
 * (a branch per channel mispredicted on random data). */
static inline void max_step(float *restrict acc, int32_t *restrict best, const float *restrict v,
                            int32_t q, int64_t m) {
    for (int64_t j = 0; j < m; j++) {
        const bool take = v[j] > acc[j] || v[j] != v[j];
        acc[j] = take ? v[j] : acc[j];
        best[j] = take ? q : best[j];
    }
}

/* The same with 64-bit indices, for planes of more than 2^31 pixels */
static void max_step_wide(float *acc, int64_t *best, const float *v, int64_t q, int64_t m) {
    for (int64_t j = 0; j < m; j++)
        if (v[j] > acc[j] || v[j] != v[j]) acc[j] = v[j], best[j] = q;
}

/* One output pixel's max over channels [c0, c0 + m): the winner's bits and, when ip, its flat
 * h * W + w within the plane. */
static void max_pixel_f32(const nhwc *a, const char *img, char *yp, int64_t *ip, int64_t oy,
                          int64_t ox, int64_t c0, int64_t m) {
    const pgeom *g = &a->g;
    int64_t y0, y1, x0, x1;
    max_window(g, oy, ox, &y0, &y1, &x0, &x1);
    const bool wide = g->h * g->w > INT32_MAX;
    float acc[RUN], buf[RUN];
    int32_t best[RUN];
    int64_t best_wide[RUN];
    for (int64_t j = 0; j < m; j++)
        acc[j] = -INFINITY, best[j] = (int32_t)(y0 * g->w + x0), best_wide[j] = y0 * g->w + x0;
    for (int64_t iy = y0; iy < y1; iy += g->dh)
        for (int64_t ix = x0; ix < x1; ix += g->dw) {
            const int64_t q = iy * g->w + ix;
            const float *v = run_f32(a, img + (size_t)(q * a->c + c0) * a->es, m, buf);
            if (wide)
                max_step_wide(acc, best_wide, v, q, m);
            else
                max_step(acc, best, v, (int32_t)q, m);
        }
    if (!wide)
        for (int64_t j = 0; j < m; j++) best_wide[j] = best[j];
    if (ip)
        for (int64_t j = 0; j < m; j++) ip[j] = best_wide[j];
    if (a->dt == TS_F32 || y0 >= y1 || x0 >= x1) { /* float32: acc holds the winners' bits */
        store_f32(a, yp, acc, m);
        return;
    }
    const uint16_t *h = (const uint16_t *)img + c0; /* a half's winner: its own bits */
    for (int64_t j = 0; j < m; j++) ((uint16_t *)yp)[j] = h[best_wide[j] * a->c + j];
}

/* The float32 global mean (adaptive to 1x1) in kern_pool.c's order: 16 partial sums over the
 * plane, added in a fixed tree at the end. */
static void global_mean_f32(const nhwc *a, const char *img, char *yp, int64_t c0, int64_t m) {
    const int64_t n = a->g.h * a->g.w;
    float part[16][RUN];
    for (int k = 0; k < 16; k++)
        for (int64_t j = 0; j < m; j++) part[k][j] = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *v = (const float *)(img + (size_t)(i * a->c + c0) * 4);
        float *p = part[(i - (i / 16) * 16)]; /* the tail too starts at part 0 */
        for (int64_t j = 0; j < m; j++) p[j] += v[j];
    }
    for (int w = 8; w > 0; w /= 2)
        for (int k = 0; k < w; k++)
            for (int64_t j = 0; j < m; j++) part[k][j] += part[k + w][j];
    for (int64_t j = 0; j < m; j++) part[0][j] /= (float)n;
    memcpy(yp, part[0], (size_t)m * sizeof(float));
}

static void sum_pixel_f32(const nhwc *a, const char *img, char *yp, int64_t oy, int64_t ox,
                          int64_t c0, int64_t m) {
    const pgeom *g = &a->g;
    if (g->kind == TS_POOL_ADAPTIVE_AVG && g->oh == 1 && g->ow == 1 && a->dt == TS_F32) {
        global_mean_f32(a, img, yp, c0, m);
        return;
    }
    int64_t y0, y1, x0, x1, div;
    sum_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
    float acc[RUN], buf[RUN];
    for (int64_t j = 0; j < m; j++) acc[j] = 0;
    if (y0 < y1 && x0 < x1) {
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) {
                const float *v =
                    run_f32(a, img + (size_t)((iy * g->w + ix) * a->c + c0) * a->es, m, buf);
                for (int64_t j = 0; j < m; j++) acc[j] += v[j];
            }
        for (int64_t j = 0; j < m; j++) acc[j] /= (float)div;
    }
    store_f32(a, yp, acc, m);
}

/* ------------------------------------------------------------------ float64 */
static void max_pixel_f64(const nhwc *a, const char *img, char *yp, int64_t *ip, int64_t oy,
                          int64_t ox, int64_t c0, int64_t m) {
    const pgeom *g = &a->g;
    int64_t y0, y1, x0, x1;
    max_window(g, oy, ox, &y0, &y1, &x0, &x1);
    double acc[RUN];
    int64_t best[RUN];
    for (int64_t j = 0; j < m; j++) acc[j] = -INFINITY, best[j] = y0 * g->w + x0;
    for (int64_t iy = y0; iy < y1; iy += g->dh)
        for (int64_t ix = x0; ix < x1; ix += g->dw) {
            const int64_t q = iy * g->w + ix;
            const double *v = (const double *)img + q * a->c + c0;
            for (int64_t j = 0; j < m; j++)
                if (v[j] > acc[j] || v[j] != v[j]) acc[j] = v[j], best[j] = q;
        }
    for (int64_t j = 0; j < m; j++) {
        ((double *)yp)[j] = acc[j];
        if (ip) ip[j] = best[j];
    }
}

static void sum_pixel_f64(const nhwc *a, const char *img, char *yp, int64_t oy, int64_t ox,
                          int64_t c0, int64_t m) {
    const pgeom *g = &a->g;
    int64_t y0, y1, x0, x1, div;
    sum_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
    double *acc = (double *)yp;
    for (int64_t j = 0; j < m; j++) acc[j] = 0;
    if (y0 >= y1 || x0 >= x1) return;
    for (int64_t iy = y0; iy < y1; iy++)
        for (int64_t ix = x0; ix < x1; ix++) {
            const double *v = (const double *)img + (iy * g->w + ix) * a->c + c0;
            for (int64_t j = 0; j < m; j++) acc[j] += v[j];
        }
    for (int64_t j = 0; j < m; j++) acc[j] /= (double)div;
}

/* ------------------------------------------------------------------ entry points */
void tsi_pool2d_nhwc(const ts_kview *out, const ts_kview *x, const ts_kview *indices,
                     const ts_pool2d_params *p) {
    const nhwc a = nhwc_of(x, out, p);
    const pgeom *g = &a.g;
    atomic_fetch_add(&calls, 1);
    const int64_t runs = (a.c + RUN - 1) / RUN, rows = a.n * g->oh;
    int64_t *idx = indices && g->kind == TS_POOL_MAX ? (int64_t *)indices->data : NULL;
    const double work = (double)a.n * (double)a.c * (double)(g->h * g->w + g->oh * g->ow);
    TS_PARALLEL_FOR_IF(
        parallel_worth(work, rows * runs), for (int64_t t = 0; t < rows * runs; t++) {
            const int64_t row = t / runs, c0 = (t % runs) * RUN;
            const int64_t n = row / g->oh, oy = row % g->oh, m = a.c - c0 < RUN ? a.c - c0 : RUN;
            const char *img = x->data + (size_t)(n * g->h * g->w * a.c) * a.es;
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t o = (row * g->ow + ox) * a.c + c0;
                char *yp = out->data + (size_t)o * a.es;
                if (g->kind != TS_POOL_MAX && a.dt == TS_F64)
                    sum_pixel_f64(&a, img, yp, oy, ox, c0, m);
                else if (g->kind != TS_POOL_MAX)
                    sum_pixel_f32(&a, img, yp, oy, ox, c0, m);
                else if (a.dt == TS_F64)
                    max_pixel_f64(&a, img, yp, idx ? idx + o : NULL, oy, ox, c0, m);
                else
                    max_pixel_f32(&a, img, yp, idx ? idx + o : NULL, oy, ox, c0, m);
            }
        });
}

/* gx[e] += v in gx's dtype, rounded at each addition as kern_pool.c's planes do */
static inline void add_to(ts_dtype dt, char *e, double v) {
    switch (dt) {
    case TS_F64:
        *(double *)e += v;
        return;
    case TS_F32:
        *(float *)e += (float)v;
        return;
    case TS_F16: {
        ts_f16_bits h;
        memcpy(&h, e, sizeof h);
        h = ts_f32_to_f16(ts_f16_to_f32(h) + (float)v);
        memcpy(e, &h, sizeof h);
        return;
    }
    default: {
        ts_bf16_bits h;
        memcpy(&h, e, sizeof h);
        h = ts_f32_to_bf16(ts_bf16_to_f32(h) + (float)v);
        memcpy(e, &h, sizeof h);
        return;
    }
    }
}

static double load_one(ts_dtype dt, const char *e) {
    switch (dt) {
    case TS_F64:
        return *(const double *)e;
    case TS_F32:
        return *(const float *)e;
    case TS_F16: {
        ts_f16_bits h;
        memcpy(&h, e, sizeof h);
        return ts_f16_to_f32(h);
    }
    default: {
        ts_bf16_bits h;
        memcpy(&h, e, sizeof h);
        return ts_bf16_to_f32(h);
    }
    }
}

/* One image's channels [c0, c0 + m) of gx from gout: every output pixel in turn, as the planes
 * visit them, so each gx element receives its additions in kern_pool.c's order. */
static void backward_image(const nhwc *a, char *gx, const char *gy, const int64_t *idx, int64_t c0,
                           int64_t m) {
    const pgeom *g = &a->g;
    const int64_t plane = g->h * g->w;
    for (int64_t q = 0; q < plane; q++)
        memset(gx + (size_t)(q * a->c + c0) * a->es, 0, (size_t)m * a->es);
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++) {
            const int64_t o = (oy * g->ow + ox) * a->c + c0;
            const char *gp = gy + (size_t)o * a->es;
            if (g->kind == TS_POOL_MAX) {
                for (int64_t j = 0; j < m; j++) {
                    const int64_t t = idx[o + j];
                    if (t >= 0 && t < plane)
                        add_to(a->dt, gx + (size_t)(t * a->c + c0 + j) * a->es,
                               load_one(a->dt, gp + (size_t)j * a->es));
                }
                continue;
            }
            int64_t y0, y1, x0, x1, div;
            sum_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
            if (y0 >= y1 || x0 >= x1) continue;
            for (int64_t j = 0; j < m; j++) {
                const double v =
                    a->dt == TS_F64
                        ? load_one(a->dt, gp + (size_t)j * a->es) / (double)div
                        : (double)((float)load_one(a->dt, gp + (size_t)j * a->es) / (float)div);
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        add_to(a->dt, gx + (size_t)((iy * g->w + ix) * a->c + c0 + j) * a->es, v);
            }
        }
}

void tsi_pool2d_backward_nhwc(const ts_kview *gx, const ts_kview *gout, const ts_kview *indices,
                              const ts_pool2d_params *p) {
    const nhwc a = nhwc_of(gx, gout, p);
    const pgeom *g = &a.g;
    atomic_fetch_add(&calls, 1);
    const int64_t runs = (a.c + RUN - 1) / RUN, tasks = a.n * runs;
    const int64_t *idx = g->kind == TS_POOL_MAX ? (const int64_t *)indices->data : NULL;
    const double work = (double)a.n * (double)a.c * (double)(g->h * g->w + g->oh * g->ow);
    TS_PARALLEL_FOR_IF(
        parallel_worth(work, tasks), for (int64_t t = 0; t < tasks; t++) {
            const int64_t n = t / runs, c0 = (t % runs) * RUN;
            const int64_t m = a.c - c0 < RUN ? a.c - c0 : RUN;
            backward_image(&a, gx->data + (size_t)(n * g->h * g->w * a.c) * a.es,
                           gout->data + (size_t)(n * g->oh * g->ow * a.c) * a.es,
                           idx ? idx + n * g->oh * g->ow * a.c : NULL, c0, m);
        });
}
