/* kern_reduce.c — CPU reductions over the trailing dims (sum, prod, mean, max/min, var/std,
 * logsumexp, arg-max/min): path choice and the row path. */
#include <stdlib.h>

#include "backend/cpu/kern_reduce.h"
#include "backend/omp_if.h"

/* Partial over reduced positions [p0, p1) of output o. */
static void row_partial(const ts_cpu_rplan *P, int64_t o, int64_t p0, int64_t p1, ts_cpu_fstate *fs,
                        ts_cpu_istate *is) {
    double dbuf[RED_CHUNK];
    int64_t ibuf[RED_CHUNK];
    const char *base = P->base + (size_t)tsi_cpu_red_lin_offset(&P->lead, o) * P->es;
    for (int64_t p = p0; p < p1; p += RED_CHUNK) {
        int64_t m = p1 - p < RED_CHUNK ? p1 - p : RED_CHUNK;
        if (P->ints) {
            tsi_cpu_red_fetch(NULL, ibuf, base, P->dt, &P->red, p, m);
            tsi_cpu_red_is_fold(P->op, is, ibuf, m, p);
        } else if (!tsi_cpu_red_fold_f32_run(P->op, fs, base, P->dt, &P->red, p, m)) {
            tsi_cpu_red_fetch(dbuf, NULL, base, P->dt, &P->red, p, m);
            tsi_cpu_red_fs_fold(P->op, fs, dbuf, m, p);
        }
    }
}

/* One output per reduced row (contiguous or gathered through strides). */
static void reduce_rows(const ts_cpu_rplan *P) {
    int64_t nb = 1;
    if (P->outputs < RED_FEW_ITEMS && P->n >= 2 * RED_BLOCK)
        nb = (P->n + RED_BLOCK - 1) / RED_BLOCK;
    bool par = P->outputs * P->n >= RED_PAR_MIN;
    if (nb == 1) {
        TS_PARALLEL_FOR_IF(
            par, for (int64_t o = 0; o < P->outputs; o++) {
                ts_cpu_fstate fs = tsi_cpu_red_fs_init(P->op);
                ts_cpu_istate is = tsi_cpu_red_is_init(P->op);
                row_partial(P, o, 0, P->n, &fs, &is);
                if (P->ints)
                    tsi_cpu_red_is_store(P->op, P->out, o, &is);
                else
                    tsi_cpu_red_fs_store(P->op, P->out, o, &fs, P->n, P->corr);
            });
        return;
    }
    int64_t items = P->outputs * nb;
    ts_cpu_fstate *fs = P->ints ? NULL : malloc((size_t)items * sizeof *fs);
    ts_cpu_istate *is = P->ints ? malloc((size_t)items * sizeof *is) : NULL;
    if (!fs && !is) { /* a serial sum would round differently: an error, not other numbers */
        tsi_kernel_oom("reduce", (size_t)items * (P->ints ? sizeof *is : sizeof *fs));
        return;
    }
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int64_t w = 0; w < items; w++) {
        int64_t o = w / nb, b = w % nb;
        int64_t p0 = b * RED_BLOCK, p1 = p0 + RED_BLOCK < P->n ? p0 + RED_BLOCK : P->n;
        ts_cpu_fstate f = tsi_cpu_red_fs_init(P->op);
        ts_cpu_istate i = tsi_cpu_red_is_init(P->op);
        row_partial(P, o, p0, p1, &f, &i);
        if (fs)
            fs[w] = f;
        else
            is[w] = i;
    }
    for (int64_t o = 0; o < P->outputs; o++) {
        if (fs) {
            for (int64_t b = 1; b < nb; b++)
                tsi_cpu_red_fs_combine(P->op, &fs[o * nb], &fs[o * nb + b]);
            tsi_cpu_red_fs_store(P->op, P->out, o, &fs[o * nb], P->n, P->corr);
        } else {
            for (int64_t b = 1; b < nb; b++)
                tsi_cpu_red_is_combine(P->op, &is[o * nb], &is[o * nb + b]);
            tsi_cpu_red_is_store(P->op, P->out, o, &is[o * nb]);
        }
    }
    free(fs);
    free(is);
}

/* Many short rows of a contiguous input (e.g. a sum over a last dim of 4): one load and one
 * store per batch of rows, so the per-output overhead does not dominate. */
static void reduce_small_rows(const ts_cpu_rplan *P) {
    int64_t n = P->n, per = RED_CHUNK / n, nbatch = (P->outputs + per - 1) / per;
    bool par = P->outputs * n >= RED_PAR_MIN;
    TS_PARALLEL_FOR_IF(
        par, for (int64_t b = 0; b < nbatch; b++) {
            double dbuf[RED_CHUNK], res[RED_CHUNK];
            int64_t ibuf[RED_CHUNK], ires[RED_CHUNK];
            int64_t o0 = b * per, cnt = P->outputs - o0 < per ? P->outputs - o0 : per;
            const char *base = P->base + (size_t)(o0 * n) * P->es;
            if (P->ints) {
                tsi_cpu_red_conv_run_i64(ibuf, base, P->dt, 1, cnt * n);
                for (int64_t j = 0; j < cnt; j++) {
                    ts_cpu_istate st = tsi_cpu_red_is_init(P->op);
                    tsi_cpu_red_is_fold(P->op, &st, ibuf + j * n, n, 0);
                    ires[j] = ts_cpu_red_is_arg(P->op) ? st.idx : st.v;
                }
                tsi_cpu_red_store_run_i(P->out, o0, ires, cnt);
                continue;
            }
            tsi_cpu_red_conv_run_f64(dbuf, base, P->dt, 1, cnt * n);
            if (P->op == TS_R_SUM || P->op == TS_R_MEAN) {
                for (int64_t j = 0; j < cnt; j++) {
                    double s = 0.0;
                    for (int64_t k = 0; k < n; k++) s += dbuf[j * n + k];
                    res[j] = P->op == TS_R_MEAN ? s / (double)n : s;
                }
            } else {
                for (int64_t j = 0; j < cnt; j++) {
                    ts_cpu_fstate st = tsi_cpu_red_fs_init(P->op);
                    tsi_cpu_red_fs_fold(P->op, &st, dbuf + j * n, n, 0);
                    res[j] = tsi_cpu_red_fs_finish(P->op, &st, n, P->corr);
                }
            }
            tsi_cpu_red_store_run_d(P->out, o0, res, cnt);
        });
}

void tsi_cpu_reduce(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                    const ts_kview *in, int nred, double param) {
    (void)be;
    (void)index;
    int nl = in->ndim - nred;
    ts_cpu_rplan P;
    P.op = op;
    P.out = out;
    P.base = in->data;
    P.dt = in->dtype;
    P.es = tsi_cpu_red_elem_size(in->dtype);
    P.corr = param;
    P.outputs = 1;
    P.n = 1;
    for (int d = 0; d < nl; d++) P.outputs *= in->shape[d];
    for (int d = nl; d < in->ndim; d++) P.n *= in->shape[d];
    if (P.outputs == 0) return;
    P.lead = tsi_cpu_red_coalesce(nl, in->shape, in->strides);
    P.red = tsi_cpu_red_coalesce(nred, in->shape + nl, in->strides + nl);
    P.ints = !(in->dtype == TS_F32 || in->dtype == TS_F64 || in->dtype == TS_F16 ||
               in->dtype == TS_BF16) &&
             (op == TS_R_SUM || op == TS_R_PROD || op == TS_R_MAX || op == TS_R_MIN ||
              ts_cpu_red_is_arg(op));
    int ll = P.lead.nd - 1;
    bool row_contig = P.red.nd == 1 && P.red.strides[0] == 1;
    bool all_contig = (row_contig || P.n == 1) && P.lead.nd == 1 && P.lead.strides[0] == P.n;
    if (all_contig && P.n >= 1 && P.n <= RED_SMALL_ROW && P.outputs > 1)
        reduce_small_rows(&P);
    else if (!row_contig && P.n > 1 && P.lead.strides[ll] == 1 && P.lead.shape[ll] >= RED_COL_MIN)
        tsi_cpu_red_cols(&P);
    else
        reduce_rows(&P);
}
