/* kern_scan_float.c — float32 / float64 cumulative sums and products (the CPU scan slot's common
 * cases) without kern_scan.c's staging buffers, with its arithmetic: each line's running value in
 * double, folded in order, every output rounded once from it, so the results are its bits.
 *
 * Rows: lines of unit stride (cumsum along the last dim) are scanned four at a time, four
 * independent dependency chains where one line alone waits on the adder's latency.
 * Columns: lines that lie side by side (another dim of unit stride in both views, e.g. cumsum
 * along dim 0 of a matrix) are scanned a row of up to SCAN_COLS lines at a time, their running
 * values in an array: the loop along the row vectorises and reads whole cache lines. */
#include "backend/cpu/kern_scan_float.h"

#include "backend/omp_if.h"
#include "backend/scan_math.h"

#define SCAN_GROUP   4     /* rows scanned together */
#define SCAN_COLS    256   /* columns scanned together */
#define SCAN_PAR_MIN 32768 /* fewer elements than this: one thread (kern_scan.c's threshold) */

#define SCAN_ADD(s, v) ((s) += (v))
#define SCAN_MUL(s, v) ((s) *= (v))

/* element offsets in in and out of position r of the dims other than skip1 and skip2 */
static void outer_offsets(const ts_kview *out, const ts_kview *in, int skip1, int skip2, int64_t r,
                          int64_t *io, int64_t *oo) {
    *io = *oo = 0;
    for (int d = in->ndim - 1; d >= 0; d--) {
        if (d == skip1 || d == skip2) continue;
        const int64_t k = r % in->shape[d];
        r /= in->shape[d];
        *io += k * in->strides[d];
        *oo += k * out->strides[d];
    }
}

/* ------------------------------------------------------------------ rows */
#define SCAN_ROWS(T, STEP)                                                                         \
    do {                                                                                           \
        if (g == SCAN_GROUP) {                                                                     \
            const T *x0 = (const T *)x[0], *x1 = (const T *)x[1], *x2 = (const T *)x[2],           \
                    *x3 = (const T *)x[3];                                                         \
            T *y0 = (T *)y[0], *y1 = (T *)y[1], *y2 = (T *)y[2], *y3 = (T *)y[3];                  \
            double s1 = s0, s2 = s0, s3 = s0;                                                      \
            for (int64_t k = 0; k < n; k++) {                                                      \
                STEP(s0, (double)x0[k]);                                                           \
                STEP(s1, (double)x1[k]);                                                           \
                STEP(s2, (double)x2[k]);                                                           \
                STEP(s3, (double)x3[k]);                                                           \
                y0[k] = (T)s0, y1[k] = (T)s1, y2[k] = (T)s2, y3[k] = (T)s3;                        \
            }                                                                                      \
        } else {                                                                                   \
            const T *x0 = (const T *)x[0];                                                         \
            T *y0 = (T *)y[0];                                                                     \
            for (int64_t k = 0; k < n; k++) {                                                      \
                STEP(s0, (double)x0[k]);                                                           \
                y0[k] = (T)s0;                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* g lines (SCAN_GROUP, or 1) of n elements: x[i] and y[i] point at line i's first elements */
static void scan_rows(ts_scan_op op, ts_dtype dt, const char *const *x, char *const *y, int g,
                      int64_t n) {
    double s0 = ts_scan_start_d(op);
    if (dt == TS_F32) {
        if (op == TS_SCAN_SUM)
            SCAN_ROWS(float, SCAN_ADD);
        else
            SCAN_ROWS(float, SCAN_MUL);
    } else {
        if (op == TS_SCAN_SUM)
            SCAN_ROWS(double, SCAN_ADD);
        else
            SCAN_ROWS(double, SCAN_MUL);
    }
}

static void run_rows(ts_scan_op op, const ts_kview *out, const ts_kview *in, int dim,
                     int64_t lines) {
    const int64_t tasks = (lines + SCAN_GROUP - 1) / SCAN_GROUP, n = in->shape[dim];
    const size_t es = in->dtype == TS_F32 ? sizeof(float) : sizeof(double);
    TS_PARALLEL_FOR_IF(
        lines * n >= SCAN_PAR_MIN && tasks > 1, for (int64_t t = 0; t < tasks; t++) {
            const int64_t r0 = t * SCAN_GROUP,
                          r1 = r0 + SCAN_GROUP < lines ? r0 + SCAN_GROUP : lines;
            const char *xs[SCAN_GROUP];
            char *ys[SCAN_GROUP];
            for (int64_t r = r0; r < r1; r++) {
                int64_t io, oo;
                outer_offsets(out, in, dim, dim, r, &io, &oo);
                xs[r - r0] = in->data + (size_t)io * es;
                ys[r - r0] = out->data + (size_t)oo * es;
                if (r1 - r0 < SCAN_GROUP) /* the last lines, fewer than a group: one at a time */
                    scan_rows(op, in->dtype, xs + (r - r0), ys + (r - r0), 1, n);
            }
            if (r1 - r0 == SCAN_GROUP) scan_rows(op, in->dtype, xs, ys, SCAN_GROUP, n);
        });
}

/* ------------------------------------------------------------------ columns */
#define SCAN_COLS_LOOP(T, STEP)                                                                    \
    for (int64_t k = 0; k < n; k++) {                                                              \
        const T *xr = (const T *)x + k * xs;                                                       \
        T *yr = (T *)y + k * ys;                                                                   \
        for (int64_t j = 0; j < m; j++) {                                                          \
            STEP(acc[j], (double)xr[j]);                                                           \
            yr[j] = (T)acc[j];                                                                     \
        }                                                                                          \
    }

/* m <= SCAN_COLS neighbouring lines of n elements from x and y, rows xs and ys elements apart */
static void scan_cols(ts_scan_op op, ts_dtype dt, const char *x, char *y, int64_t n, int64_t xs,
                      int64_t ys, int64_t m) {
    double acc[SCAN_COLS];
    for (int64_t j = 0; j < m; j++) acc[j] = ts_scan_start_d(op);
    if (dt == TS_F32) {
        if (op == TS_SCAN_SUM)
            SCAN_COLS_LOOP(float, SCAN_ADD)
        else
            SCAN_COLS_LOOP(float, SCAN_MUL)
    } else {
        if (op == TS_SCAN_SUM)
            SCAN_COLS_LOOP(double, SCAN_ADD)
        else
            SCAN_COLS_LOOP(double, SCAN_MUL)
    }
}

/* lines along dim, side by side along q */
static void run_cols(ts_scan_op op, const ts_kview *out, const ts_kview *in, int dim, int q,
                     int64_t lines) {
    const int64_t n = in->shape[dim], width = in->shape[q], outer = lines / width;
    const int64_t blocks = (width + SCAN_COLS - 1) / SCAN_COLS, tasks = outer * blocks;
    const size_t es = in->dtype == TS_F32 ? sizeof(float) : sizeof(double);
    TS_PARALLEL_FOR_IF(
        lines * n >= SCAN_PAR_MIN && tasks > 1, for (int64_t t = 0; t < tasks; t++) {
            const int64_t c0 = t % blocks * SCAN_COLS;
            int64_t io, oo;
            outer_offsets(out, in, dim, q, t / blocks, &io, &oo);
            scan_cols(op, in->dtype, in->data + (size_t)(io + c0) * es,
                      out->data + (size_t)(oo + c0) * es, n, in->strides[dim], out->strides[dim],
                      width - c0 < SCAN_COLS ? width - c0 : SCAN_COLS);
        });
}

bool tsi_cpu_scan_float(ts_scan_op op, const ts_kview *out, const ts_kview *in, int dim) {
    const ts_dtype dt = in->dtype;
    if ((op != TS_SCAN_SUM && op != TS_SCAN_PROD) || (dt != TS_F32 && dt != TS_F64) ||
        out->dtype != dt)
        return false;
    int64_t lines = 1;
    for (int d = 0; d < in->ndim; d++)
        if (d != dim) lines *= in->shape[d];
    if (lines == 0 || in->shape[dim] == 0) return true; /* nothing to write */
    if (in->strides[dim] == 1 && out->strides[dim] == 1) {
        run_rows(op, out, in, dim, lines);
        return true;
    }
    for (int q = in->ndim - 1; q >= 0; q--)
        if (q != dim && in->shape[q] > 1 && in->strides[q] == 1 && out->strides[q] == 1) {
            run_cols(op, out, in, dim, q, lines);
            return true;
        }
    return false;
}
