/* loader_batch.c — the loader's per-batch work: epoch permutations, fetching and transforming
 * samples, stacking them into one batch tensor, and the copy to the target device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/philox.h"
#include "data/loader_internal.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

int64_t *tsi_loader_permutation(uint64_t seed, int64_t epoch, int64_t n) {
    int64_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) {
        tsi_error_set(TS_ERR_OOM, "loader: out of host memory for a permutation of %lld",
                      (long long)n);
        return NULL;
    }
    /* Keys for positions 2b and 2b+1 are the words of the Philox block under key `seed` with
     * counter {(uint32)b, (uint32)(b >> 32), (uint32)epoch, 0xFFFFFFFF} (a stream no transform
     * draw reaches, see transform.c); then ts_randperm's inside-out Fisher-Yates shuffle. */
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t b = (uint64_t)i >> 1;
        uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)epoch, 0xFFFFFFFFu}, w[4];
        ts_philox4x32_10(ctr, key, w);
        for (int64_t h = 0; h < 2 && i + h < n; h++) {
            const int64_t at = i + h;
            uint64_t r = ((uint64_t)w[2 * h + 1] << 32) | w[2 * h];
            int64_t j = (int64_t)(r % (uint64_t)(at + 1));
            if (j != at) p[at] = p[j];
            p[j] = at;
        }
    }
    return p;
}

static inline char *host_ptr(ts_tensor *t) {
    return t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
}

/* What a batch is made of: the first sample's dtype and shape for x and y. */
typedef struct layout {
    ts_dtype dt;
    ts_shape s;
} layout;

static layout layout_of(ts_tensor *t) {
    return t ? (layout){t->dtype, t->shape} : (layout){TS_I64, TS_SHAPE(0)};
}

static bool same_layout(layout a, layout b) {
    if (a.dt != b.dt || a.s.ndim != b.s.ndim) return false;
    for (int i = 0; i < a.s.ndim; i++)
        if (a.s.dims[i] != b.s.dims[i]) return false;
    return true;
}

static const char *layout_str(layout a) {
    char *buf = tsi_fmt_buf();
    snprintf(buf, TSI_FMT_BUF_LEN, "%s %s", ts_dtype_name(a.dt), tsi_shape_str(a.s));
    return buf;
}

/* The batch tensor for count samples of layout a: allocated once, samples are copied into its
 * rows. Through the public factory so pin_memory gets whatever pinning the build provides. */
static ts_tensor *batch_new(ts_loader *l, layout a, int64_t count) {
    if (a.s.ndim >= TS_MAX_DIMS) {
        tsi_error_set(TS_ERR_SHAPE, "loader: samples of %d dims leave no room for the batch dim",
                      a.s.ndim);
        return NULL;
    }
    ts_shape s;
    s.ndim = a.s.ndim + 1;
    s.dims[0] = count;
    for (int i = 1; i < TS_MAX_DIMS; i++) s.dims[i] = i <= a.s.ndim ? a.s.dims[i - 1] : 0;
    ts_opts o = {.dtype = a.dt, .device = ts_cpu(), .pin_memory = l->pin_memory};
    return ts_retain(ts_empty(s, o)); /* the build's scope holds the other reference */
}

/* Copies sample t into row i of batch b (same dtype and element count, checked). */
static void put_row(ts_tensor *b, int64_t i, ts_tensor *t) {
    const int64_t per = tsi_numel(t->shape);
    if (per == 0) return;
    const size_t es = tsi_dtype_size(t->dtype);
    char *dst = host_ptr(b) + (size_t)(i * per) * es;
    if (tsi_is_contiguous(t)) {
        memcpy(dst, host_ptr(t), (size_t)per * es);
        return;
    }
    ts_kview sv = tsi_kview(t), dv = sv;
    dv.data = dst;
    tsi_contiguous_strides(&t->shape, dv.strides);
    tsi_be(t)->copy(tsi_be(t), 0, &dv, &sv);
}

static bool check_sample(ts_tensor *t, const char *what, int64_t idx) {
    if (tsi_device(t).type == TS_CPU) return true;
    tsi_error_set(TS_ERR_DEVICE, "loader: sample %lld: %s is %s; datasets give cpu tensors",
                  (long long)idx, what, tsi_desc(t));
    return false;
}

/* Fetches, transforms and stores sample `idx` as row i of the batch (allocating the batch tensors
 * at row 0). Releases everything it got. */
static bool add_sample(ts_loader *l, int64_t epoch, int64_t k, int64_t i, int64_t count,
                       int64_t idx, ts_tensor **bx, ts_tensor **by, layout *lx, layout *ly) {
    ts_sample s = {0};
    ts_status st = ts_dataset_get_epoch(l->ds, idx, epoch, &s);
    if (st != TS_OK || !s.x) {
        if (ts_error() == TS_OK)
            tsi_error_set(st != TS_OK ? st : TS_ERR_STATE, "loader: dataset get(%lld) failed%s",
                          (long long)idx, st != TS_OK ? "" : ": it gave no x");
        ts_release(s.x);
        ts_release(s.y);
        return false;
    }
    ts_tensor *x = s.x, *y = s.y;
    bool ok = check_sample(x, "x", idx) && (!y || check_sample(y, "y", idx));
    if (ok && l->transform) {
        ts_transform_ctx c = {.seed = l->seed, .epoch = epoch, .index = idx};
        x = ts_transform_apply(l->transform, x, &c);
        ok = x && check_sample(x, "transformed x", idx);
    }
    if (ok && i == 0) {
        *lx = layout_of(x);
        *ly = layout_of(y);
        ok = (*bx = batch_new(l, *lx, count)) && (*by = batch_new(l, *ly, count));
    } else if (ok) {
        layout ax = layout_of(x), ay = layout_of(y);
        bool okx = same_layout(ax, *lx), oky = same_layout(ay, *ly);
        if (!okx || !oky) {
            tsi_error_set(TS_ERR_SHAPE,
                          "loader: batch %lld: sample %lld has %s %s, but the batch's first sample "
                          "has %s; samples of a batch must match",
                          (long long)k, (long long)idx, okx ? "y" : "x", layout_str(okx ? ay : ax),
                          layout_str(okx ? *ly : *lx));
            ok = false;
        }
    }
    if (ok) {
        put_row(*bx, i, x);
        if (y) put_row(*by, i, y);
    }
    ts_release(x);
    ts_release(y);
    return ok;
}

/* ------------------------------------------------------------------ the fast path */
static bool same_shape(ts_shape a, ts_shape b) {
    return same_layout((layout){TS_U8, a}, (layout){TS_U8, b});
}

void tsi_loader_plan_fast(ts_loader *l) {
    l->fast = false;
    if (!l->ds->raw || l->n < 1) return;
    tsi_raw_sample r;
    l->ds->raw(l->ds->ctx, 0, &r);
    l->fast_raw = r; /* its layout: the bytes are read per sample */
    l->fast_raw.x = l->fast_raw.y = NULL;
    if (!l->transform) {
        l->fast_xdt = r.xdt;
        l->fast_xs = r.xs;
        l->fast = true;
        return;
    }
    const int nd = r.xs.ndim;
    const int64_t ch = nd == 3 ? r.xs.dims[2] : 1;
    if (r.xdt != TS_U8 || (nd != 2 && nd != 3) || ch < 1 || ch > 4) return;
    if (!tsi_transform_u8_plan(l->transform, ch, &l->plan)) return;
    l->fast_plan = true;
    l->fast_xdt = TS_F32;
    l->fast_xs = TS_SHAPE(ch, r.xs.dims[0], r.xs.dims[1]);
    l->fast = true;
}

/* x of a raw sample into row i of b: through the plan ([H, W, C] u8 -> [C, H, W] f32), or copied */
static void fast_row_x(const ts_loader *l, ts_tensor *b, int64_t i, const tsi_raw_sample *r) {
    const int64_t per = tsi_numel(l->fast_xs);
    if (!l->fast_plan) {
        memcpy(host_ptr(b) + (size_t)(i * per) * tsi_dtype_size(r->xdt), r->x,
               (size_t)per * tsi_dtype_size(r->xdt));
        return;
    }
    const int64_t ch = l->fast_xs.dims[0];
    tsi_u8_plan_apply(&l->plan, r->x, per / ch, ch, (float *)host_ptr(b) + i * per);
}

/* The raw sample at position pos of the epoch's order, into *r (which its y may point into). */
static void raw_at(const ts_loader *l, int64_t pos, tsi_raw_sample *r) {
    l->ds->raw(l->ds->ctx, l->order ? l->order[pos] : pos, r);
}

#define PREFETCH_AHEAD 4 /* samples: a few conversions' time covers a memory access */

/* Starts loading a sample's bytes into the cache: a shuffled epoch reads the data set at random,
 * and the row conversion would otherwise wait on every line of every sample. */
static void prefetch_x(const tsi_raw_sample *r) {
    const size_t bytes = (size_t)tsi_numel(r->xs) * tsi_dtype_size(r->xdt);
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)r->x + off);
}

/* Rows [b, e) of the batch starting at position start, each sample's bytes prefetched a few rows
 * ahead. */
static void fast_rows(const ts_loader *l, int64_t start, int64_t b, int64_t e, ts_tensor *x,
                      ts_tensor *y) {
    const size_t ybytes = (size_t)tsi_numel(l->fast_raw.ys) * tsi_dtype_size(l->fast_raw.ydt);
    for (int64_t i = b; i < e && i < b + PREFETCH_AHEAD; i++) {
        tsi_raw_sample r;
        raw_at(l, start + i, &r);
        prefetch_x(&r);
    }
    for (int64_t i = b; i < e; i++) {
        if (i + PREFETCH_AHEAD < e) {
            tsi_raw_sample ahead;
            raw_at(l, start + i + PREFETCH_AHEAD, &ahead);
            prefetch_x(&ahead);
        }
        tsi_raw_sample r;
        raw_at(l, start + i, &r);
        fast_row_x(l, x, i, &r);
        if (ybytes) memcpy(host_ptr(y) + (size_t)i * ybytes, r.y, ybytes);
    }
}

/* The whole batch through the fast path: 1 done, 0 when a sample is laid out unlike the plan (the
 * general path then says what differs), -1 on error. With no workers the kernels' OpenMP threads
 * idle while the caller builds a batch, so they fill its rows together. */
static int fast_batch(ts_loader *l, int64_t start, int64_t count, ts_tensor **bx, ts_tensor **by,
                      layout *lx, layout *ly) {
    if (!l->fast) return 0;
    const tsi_raw_sample *p = &l->fast_raw;
    for (int64_t i = 0; i < count; i++) {
        tsi_raw_sample r;
        raw_at(l, start + i, &r);
        if (r.xdt != p->xdt || r.ydt != p->ydt || !same_shape(r.xs, p->xs) ||
            !same_shape(r.ys, p->ys))
            return 0;
    }
    *lx = (layout){l->fast_xdt, l->fast_xs};
    *ly = (layout){p->ydt, p->ys};
    if (!(*bx = batch_new(l, *lx, count)) || !(*by = batch_new(l, *ly, count))) return -1;
    ts_tensor *x = *bx, *y = *by;
#ifdef TS_HAVE_OPENMP
    const bool par =
        l->workers == 0 && count >= 16 && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel if (par)
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        fast_rows(l, start, count * t / nt, count * (t + 1) / nt, x, y);
    }
#else
    fast_rows(l, start, 0, count, x, y);
#endif
    return 1;
}

ts_status tsi_loader_build(ts_loader *l, int64_t epoch, int64_t k, ts_tensor **x, ts_tensor **y) {
    *x = *y = NULL;
    const int64_t start = k * l->batch_size;
    const int64_t count = l->n - start < l->batch_size ? l->n - start : l->batch_size;
    ts_tensor *bx = NULL, *by = NULL;
    layout lx, ly;
    bool ok = true;
    /* datasets and user transforms may make scope-owned temporaries: they die with the batch */
    ts_scope_begin();
    const int fast = fast_batch(l, start, count, &bx, &by, &lx, &ly);
    ok = fast >= 0;
    for (int64_t i = 0; i < count && ok && !fast; i++) {
        const int64_t idx = l->order ? l->order[start + i] : start + i;
        ok = add_sample(l, epoch, k, i, count, idx, &bx, &by, &lx, &ly);
    }
    ts_scope_end();
    if (ok && l->to_device) {
        ts_tensor *dx = tsi_to_device("loader", bx, l->device);
        ts_tensor *dy = dx ? tsi_to_device("loader", by, l->device) : NULL;
        ts_release(bx);
        ts_release(by);
        bx = dx;
        by = dy;
        ok = dx && dy;
    }
    if (!ok) {
        ts_release(bx);
        ts_release(by);
        if (ts_error() == TS_OK)
            tsi_error_set(TS_ERR_STATE, "loader: batch %lld failed", (long long)k);
        return ts_error();
    }
    *x = bx;
    *y = by;
    return TS_OK;
}
