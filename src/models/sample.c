/* sample.c — drawing tokens from logits: greedy, temperature and top-k (nanoGPT's rules), one
 * U[0, 1) per row from the global generator. */
#include <math.h>
#include <stdlib.h>

#include "tessera.h"

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* One row: the index drawn for u in [0, 1) (or the first maximum when greedy). */
static int64_t sample_row(double *l, double *scratch, int64_t V, ts_sample_opts o, double u) {
    int64_t best = 0;
    for (int64_t j = 1; j < V; j++)
        if (l[j] > l[best]) best = j;
    if (o.greedy) return best;
    const double temp = o.temperature > 0 ? o.temperature : 1.0;
    double thr = -INFINITY;
    if (o.top_k > 0 && o.top_k < V) {
        for (int64_t j = 0; j < V; j++) scratch[j] = l[j];
        qsort(scratch, (size_t)V, sizeof *scratch, cmp_desc);
        thr = scratch[o.top_k - 1];
    }
    const double mx = l[best] / temp;
    double sum = 0;
    for (int64_t j = 0; j < V; j++) {
        scratch[j] = l[j] >= thr ? exp(l[j] / temp - mx) : 0.0;
        sum += scratch[j];
    }
    const double target = u * sum;
    double cum = 0;
    int64_t last = best;
    for (int64_t j = 0; j < V; j++) {
        if (scratch[j] <= 0) continue;
        cum += scratch[j];
        last = j;
        if (cum > target) return j;
    }
    return last; /* rounding: the last token with a non-zero probability */
}

ts_tensor *ts_sample_logits(ts_tensor *logits, ts_sample_opts o) {
    const char *op = "sample_logits";
    if (!logits) {
        if (!ts_error()) ts_error_set(TS_ERR_ARG, "%s: logits is NULL", op);
        return NULL;
    }
    if (ts_ndim(logits) != 2 || !ts_dtype_is_floating(ts_dtype_of(logits)) ||
        ts_size(logits, 1) < 1)
        return ts_error_set(TS_ERR_SHAPE,
                            "%s: expected floating point logits [B, V] with V >= 1, got %s with "
                            "%d dims",
                            op, ts_dtype_name(ts_dtype_of(logits)), ts_ndim(logits)),
               NULL;
    if (!(o.temperature >= 0) || isinf(o.temperature) || o.top_k < 0)
        return ts_error_set(TS_ERR_ARG,
                            "%s: temperature must be finite and >= 0 (0: 1) and top_k >= 0 (0: "
                            "all), got %g and %lld",
                            op, o.temperature, (long long)o.top_k),
               NULL;
    const int64_t B = ts_size(logits, 0), V = ts_size(logits, 1);
    double *l = malloc((size_t)(B * V + V + B + 1) * sizeof *l);
    int64_t *tok = malloc((size_t)(B + 1) * sizeof *tok);
    if (!l || !tok) {
        free(l);
        free(tok);
        return ts_error_set(TS_ERR_OOM, "%s: out of host memory for [%lld, %lld] logits", op,
                            (long long)B, (long long)V),
               NULL;
    }
    double *scratch = l + B * V, *u = scratch + V;
    ts_scope_begin();
    ts_status st = ts_copy_to_host(ts_to_dtype(logits, TS_F64), l, (size_t)(B * V) * sizeof *l);
    if (st == TS_OK && !o.greedy && B > 0)
        st = ts_copy_to_host(ts_rand(TS_SHAPE(B), (ts_opts){.dtype = TS_F64, .device = ts_cpu()}),
                             u, (size_t)B * sizeof *u);
    ts_tensor *out = NULL;
    if (st == TS_OK) {
        for (int64_t b = 0; b < B; b++)
            tok[b] = sample_row(l + b * V, scratch, V, o, o.greedy ? 0.0 : u[b]);
        out = ts_keep(ts_tensor_i64(TS_SHAPE(B), tok, (ts_opts){.dtype = TS_I64,
                                                              .device = ts_device_of(logits)}));
    }
    ts_scope_end();
    free(l);
    free(tok);
    return out;
}
