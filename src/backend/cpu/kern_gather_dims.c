/* kern_gather_dims.c — CPU gather along the last k dims at once (pad's reflect, replicate and
 * circular modes): one pass over the output, row by row (a row: all dims but the last). A row's
 * source row comes from the byte-offset tables of the other gathered dims and a counter over the
 * outer dims; the row itself is copied as runs: where consecutive outputs read consecutive
 * elements (the unpadded middle of a reflect / replicate / circular row) one memcpy, elsewhere
 * element by element. Rows run in parallel when there are many elements. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/omp_if.h"

#define GD_PAR_MIN 65536 /* fewer output elements than this: one thread */
#define GD_ROWS    64    /* rows a parallel item */

typedef struct gd_run {
    int64_t at, src, len; /* output position, source byte offset, length (elements) */
} gd_run;

typedef struct gd_job {
    const ts_kview *out, *in;
    int k, nd;
    const int64_t *tab[3];        /* tab[i]: source byte offsets along dim nd - 1 - i (i >= 1) */
    const gd_run *runs, *singles; /* runs of 2 or more elements; the single elements */
    int64_t nruns, nsingles;
    int64_t nrows, len, inner; /* output rows, their length, rows a step of the outer dims */
    size_t es;
} gd_job;

/* the source byte offset of outer index o (dims 0 .. nd - k - 1, not gathered) */
static int64_t outer_source(const gd_job *j, int64_t o) {
    int64_t off = 0;
    for (int d = j->nd - j->k - 1; d >= 0; d--) {
        const int64_t n = j->out->shape[d];
        off += o % n * j->in->strides[d];
        o /= n;
    }
    return off * (int64_t)j->es;
}

/* one row: the single elements in a tight loop, then the runs (memcpy); T a same-size integer
 * type (bits are copied) */
#define GD_COPY_ROW(NAME, T)                                                                       \
    static void NAME(const gd_job *j, char *dst, const char *src) {                                \
        T *d = (T *)(void *)dst;                                                                   \
        for (int64_t q = 0; q < j->nsingles; q++) {                                                \
            T v;                                                                                   \
            memcpy(&v, src + j->singles[q].src, sizeof v);                                         \
            d[j->singles[q].at] = v;                                                               \
        }                                                                                          \
        for (int64_t q = 0; q < j->nruns; q++) {                                                   \
            const gd_run *r = &j->runs[q];                                                         \
            memcpy(d + r->at, src + r->src, (size_t)r->len * sizeof(T));                           \
        }                                                                                          \
    }
GD_COPY_ROW(copy_row_1, uint8_t)
GD_COPY_ROW(copy_row_2, uint16_t)
GD_COPY_ROW(copy_row_4, uint32_t)
GD_COPY_ROW(copy_row_8, uint64_t)

static void copy_row(const gd_job *j, char *dst, const char *src) {
    switch (j->es) {
    case 1:
        copy_row_1(j, dst, src);
        break;
    case 2:
        copy_row_2(j, dst, src);
        break;
    case 4:
        copy_row_4(j, dst, src);
        break;
    default:
        copy_row_8(j, dst, src);
        break; /* no wider dtypes */
    }
}

static void gather_rows(const gd_job *j, int64_t r0, int64_t r1) {
    const int64_t n1 = j->k >= 2 ? j->out->shape[j->nd - 2] : 1;
    int64_t o = r0 / j->inner, rem = r0 % j->inner, c1 = rem % n1, c2 = rem / n1;
    int64_t base = outer_source(j, o);
    for (int64_t r = r0; r < r1; r++) {
        int64_t src = base;
        if (j->k >= 2) src += j->tab[1][c1];
        if (j->k >= 3) src += j->tab[2][c2];
        copy_row(j, j->out->data + r * j->len * (int64_t)j->es, j->in->data + src);
        if (++c1 == n1) {
            c1 = 0;
            if (++c2 * n1 == j->inner) {
                c2 = 0;
                if (r + 1 < r1) base = outer_source(j, ++o);
            }
        }
    }
}

void tsi_cpu_gather_dims(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                         int k, const ts_kview *idx) {
    (void)be, (void)index;
    const int nd = out->ndim;
    if (nd < 1 || k < 1 || k > 3 || k > nd) return;
    gd_job j = {.out = out, .in = in, .k = k, .nd = nd, .es = ts_cpu_dtype_size(out->dtype)};
    j.len = out->shape[nd - 1];
    j.nrows = j.inner = 1;
    for (int d = 0; d < nd - 1; d++) j.nrows *= out->shape[d];
    for (int i = 1; i < k; i++) j.inner *= out->shape[nd - 1 - i];
    if (j.len <= 0 || j.nrows <= 0) return;
    /* one block: the last dim's runs, then the other dims' offset tables */
    int64_t total = 0;
    for (int i = 1; i < k; i++) total += out->shape[nd - 1 - i];
    char *mem = malloc(sizeof(gd_run) * (size_t)j.len + sizeof(int64_t) * (size_t)total);
    if (!mem) {
        tsi_kernel_oom("gather_dims",
                       sizeof(gd_run) * (size_t)j.len + sizeof(int64_t) * (size_t)total);
        return;
    }
    gd_run *runs = (gd_run *)(void *)mem;
    int64_t *tabs = (int64_t *)(void *)(runs + j.len);
    const int64_t es = (int64_t)j.es, s0 = in->strides[nd - 1] * es;
    const int64_t *i0 = (const int64_t *)(const void *)idx[0].data, is0 = idx[0].strides[0];
    int64_t nr = 0;
    for (int64_t c = 0; c < j.len; c++) {
        const int64_t src = i0[c * is0] * s0;
        if (nr && s0 == es && runs[nr - 1].src + runs[nr - 1].len * es == src)
            runs[nr - 1].len++;
        else
            runs[nr++] = (gd_run){c, src, 1};
    }
    /* the single elements first, then the runs (one array, in place) */
    int64_t ns = 0;
    for (int64_t q = 0; q < nr; q++)
        if (runs[q].len == 1) {
            const gd_run t = runs[q];
            memmove(runs + ns + 1, runs + ns, sizeof *runs * (size_t)(q - ns));
            runs[ns++] = t;
        }
    j.singles = runs, j.nsingles = ns, j.runs = runs + ns, j.nruns = nr - ns;
    for (int i = 1, at = 0; i < k; i++) {
        const int d = nd - 1 - i;
        const int64_t n = out->shape[d], st = idx[i].strides[0];
        const int64_t *ix = (const int64_t *)(const void *)idx[i].data;
        for (int64_t c = 0; c < n; c++) tabs[at + c] = ix[c * st] * in->strides[d] * es;
        j.tab[i] = tabs + at;
        at += (int)n;
    }
    const int64_t items = (j.nrows + GD_ROWS - 1) / GD_ROWS;
    TS_PARALLEL_FOR_IF(
        j.nrows * j.len >= GD_PAR_MIN && items > 1, for (int64_t t = 0; t < items; t++) {
            const int64_t r0 = t * GD_ROWS;
            gather_rows(&j, r0, r0 + GD_ROWS < j.nrows ? r0 + GD_ROWS : j.nrows);
        });
    free(mem);
}
