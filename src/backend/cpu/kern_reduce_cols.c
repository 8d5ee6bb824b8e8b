/* kern_reduce_cols.c — the CPU reduction path for "reduce the outer dims, keep a contiguous inner
 * dim" (e.g. a column sum of a row-major matrix). */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/kern_reduce.h"

/* ------------------------------------------------------------------ column path */
/* "Reduce the outer dims, keep a contiguous inner dim": each reduced position contributes one
 * contiguous row of tn kept columns, accumulated into per-column arrays (vectorisable), instead of
 * a strided walk per output. Columns of base .. base+tn-1, reduced positions [p0, p1). */
static void col_partial(const ts_cpu_rplan *P, const char *base, int64_t tn, int64_t p0, int64_t p1,
                        ts_cpu_fstate *fs, ts_cpu_istate *is) {
    ts_reduce_op op = P->op;
    ts_cpu_odo o;
    if (P->ints) {
        int64_t V[RED_TILE], I[RED_TILE], x[RED_TILE];
        ts_cpu_istate init = ts_cpu_red_is_init(op);
        for (int64_t c = 0; c < tn; c++) V[c] = init.v, I[c] = -1;
        ts_cpu_red_odo_init(&o, &P->red, p0);
        for (int64_t p = p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
            ts_cpu_red_conv_run_i64(x, base + (size_t)o.off * P->es, P->dt, 1, tn);
            switch (op) {
            case TS_R_SUM:
                for (int64_t c = 0; c < tn; c++) V[c] = (int64_t)((uint64_t)V[c] + (uint64_t)x[c]);
                break;
            case TS_R_PROD:
                for (int64_t c = 0; c < tn; c++) V[c] = (int64_t)((uint64_t)V[c] * (uint64_t)x[c]);
                break;
            case TS_R_MAX:
                for (int64_t c = 0; c < tn; c++) V[c] = x[c] > V[c] ? x[c] : V[c];
                break;
            case TS_R_MIN:
                for (int64_t c = 0; c < tn; c++) V[c] = x[c] < V[c] ? x[c] : V[c];
                break;
            default: /* arg */
                for (int64_t c = 0; c < tn; c++)
                    if (I[c] < 0 || (op == TS_R_ARGMAX ? x[c] > V[c] : x[c] < V[c]))
                        V[c] = x[c], I[c] = p;
                break;
            }
        }
        for (int64_t c = 0; c < tn; c++) is[c] = (ts_cpu_istate){V[c], I[c]};
        return;
    }
    double A[RED_TILE], B[RED_TILE], x[RED_TILE];
    int64_t I[RED_TILE];
    ts_cpu_fstate init = ts_cpu_red_fs_init(op);
    for (int64_t c = 0; c < tn; c++) A[c] = init.a, B[c] = 0.0, I[c] = -1;
    ts_cpu_red_odo_init(&o, &P->red, p0);
    for (int64_t p = p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
        ts_cpu_red_conv_run_f64(x, base + (size_t)o.off * P->es, P->dt, 1, tn);
        switch (op) {
        case TS_R_SUM:
        case TS_R_MEAN:
        case TS_R_VAR:
        case TS_R_STD:
            for (int64_t c = 0; c < tn; c++) A[c] += x[c];
            break;
        case TS_R_PROD:
            for (int64_t c = 0; c < tn; c++) A[c] *= x[c];
            break;
        case TS_R_MAX:
        case TS_R_LOGSUMEXP:
            for (int64_t c = 0; c < tn; c++) A[c] = (x[c] > A[c] || x[c] != x[c]) ? x[c] : A[c];
            break;
        case TS_R_MIN:
            for (int64_t c = 0; c < tn; c++) A[c] = (x[c] < A[c] || x[c] != x[c]) ? x[c] : A[c];
            break;
        default: { /* arg: a NaN best is final; a NaN candidate wins */
            bool mx = op == TS_R_ARGMAX;
            for (int64_t c = 0; c < tn; c++)
                if (I[c] < 0 ||
                    (A[c] == A[c] && (x[c] != x[c] || (mx ? x[c] > A[c] : x[c] < A[c]))))
                    A[c] = x[c], I[c] = p;
            break;
        }
        }
    }
    int64_t cnt = p1 - p0;
    if (op == TS_R_VAR || op == TS_R_STD || op == TS_R_LOGSUMEXP) { /* second pass */
        bool var = op != TS_R_LOGSUMEXP;
        if (var)
            for (int64_t c = 0; c < tn; c++) A[c] /= (double)cnt;
        ts_cpu_red_odo_init(&o, &P->red, p0);
        for (int64_t p = p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
            ts_cpu_red_conv_run_f64(x, base + (size_t)o.off * P->es, P->dt, 1, tn);
            if (var)
                for (int64_t c = 0; c < tn; c++) B[c] += (x[c] - A[c]) * (x[c] - A[c]);
            else
                for (int64_t c = 0; c < tn; c++) B[c] += exp(x[c] - A[c]);
        }
    }
    for (int64_t c = 0; c < tn; c++) {
        if (op == TS_R_LOGSUMEXP)
            fs[c] = ts_cpu_red_lse_make(A[c], B[c]);
        else
            fs[c] = (ts_cpu_fstate){A[c], B[c], cnt, I[c]};
    }
}

void ts_cpu_red_cols(const ts_cpu_rplan *P) {
    int64_t C = P->lead.shape[P->lead.nd - 1];
    ts_cpu_rdims rest = P->lead;
    rest.nd--;
    int64_t nq = P->outputs / C, ntiles = (C + RED_TILE - 1) / RED_TILE, items = nq * ntiles;
    int64_t nb = 1, bs = P->n;
    if (items < RED_FEW_ITEMS && P->outputs * P->n >= 2 * RED_PAR_MIN) {
        nb = (P->n + RED_COL_BLOCK - 1) / RED_COL_BLOCK;
        if (nb > RED_COL_BLOCKS) nb = RED_COL_BLOCKS;
        bs = (P->n + nb - 1) / nb;
        nb = (P->n + bs - 1) / bs;
    }
    bool par = P->outputs * P->n >= RED_PAR_MIN;
    (void)par;
    ts_cpu_fstate *fs = NULL;
    ts_cpu_istate *is = NULL;
    if (nb > 1) {
        if (P->ints)
            is = malloc((size_t)(items * nb * RED_TILE) * sizeof *is);
        else
            fs = malloc((size_t)(items * nb * RED_TILE) * sizeof *fs);
        if (!fs && !is) return; /* out of host memory */
    }
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (par)
#endif
    for (int64_t w = 0; w < items * nb; w++) {
        int64_t it = w / nb, b = w % nb, q = it / ntiles, c0 = (it % ntiles) * RED_TILE;
        int64_t tn = C - c0 < RED_TILE ? C - c0 : RED_TILE;
        int64_t p0 = b * bs, p1 = p0 + bs < P->n ? p0 + bs : P->n;
        const char *base = P->base + (size_t)(ts_cpu_red_lin_offset(&rest, q) + c0) * P->es;
        if (nb > 1) {
            col_partial(P, base, tn, p0, p1, fs ? fs + w * RED_TILE : NULL,
                        is ? is + w * RED_TILE : NULL);
            continue;
        }
        ts_cpu_fstate lf[RED_TILE];
        ts_cpu_istate li[RED_TILE];
        col_partial(P, base, tn, p0, p1, lf, li);
        for (int64_t c = 0; c < tn; c++) {
            if (P->ints)
                ts_cpu_red_is_store(P->op, P->out, q * C + c0 + c, &li[c]);
            else
                ts_cpu_red_fs_store(P->op, P->out, q * C + c0 + c, &lf[c], P->n, P->corr);
        }
    }
    if (nb == 1) return;
    for (int64_t it = 0; it < items; it++) {
        int64_t q = it / ntiles, c0 = (it % ntiles) * RED_TILE;
        int64_t tn = C - c0 < RED_TILE ? C - c0 : RED_TILE;
        for (int64_t c = 0; c < tn; c++) {
            int64_t first = it * nb * RED_TILE + c;
            for (int64_t b = 1; b < nb; b++) {
                if (fs)
                    ts_cpu_red_fs_combine(P->op, &fs[first], &fs[first + b * RED_TILE]);
                else
                    ts_cpu_red_is_combine(P->op, &is[first], &is[first + b * RED_TILE]);
            }
            if (fs)
                ts_cpu_red_fs_store(P->op, P->out, q * C + c0 + c, &fs[first], P->n, P->corr);
            else
                ts_cpu_red_is_store(P->op, P->out, q * C + c0 + c, &is[first]);
        }
    }
    free(fs);
    free(is);
}
