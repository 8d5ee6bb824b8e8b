/* kern_reduce.h — internals shared by the CPU reduction files: coalesced dims, partial states. */
#ifndef TS_CPU_KERN_REDUCE_H
#define TS_CPU_KERN_REDUCE_H

#include "backend/cpu/cpu_kernels.h"

#define RED_CHUNK      1024  /* elements converted to double at a time (stays in L1) */
#define RED_BLOCK      32768 /* elements per partial when one output is split across threads */
#define RED_PAR_MIN    32768 /* below this many input elements everything runs on one thread */
#define RED_FEW_ITEMS  16    /* fewer independent work items than this: also split the reduction */
#define RED_COL_MIN    16    /* kept contiguous dim at least this long to use the column path */
#define RED_COL_BLOCKS 32    /* at most this many position blocks in a split column reduction */
#define RED_COL_BLOCK  256   /* at least this many positions per such block */
#define RED_SMALL_ROW  64    /* contiguous rows up to this long are batched, many per load */
/* Columns per tile in the "reduce outer, keep inner" path. Reading whole rows (up to 16 KiB of
 * f32) per position keeps the reads streaming; tiles that cut rows into pieces ran 3-8x slower. */
#define RED_TILE 4096

/* Every split depends only on shapes, never on the thread count, and partial results are combined
 * in a fixed order, so the output does not change with the number of threads. */

typedef struct ts_cpu_rdims {
    int nd;
    int64_t shape[TS_MAX_DIMS];
    int64_t strides[TS_MAX_DIMS];
} ts_cpu_rdims;

/* A walk over the positions of a coalesced dim set in row-major order. */
typedef struct ts_cpu_odo {
    int64_t idx[TS_MAX_DIMS];
    int64_t off;
} ts_cpu_odo;

static inline void ts_cpu_odo_next(ts_cpu_odo *o, const ts_cpu_rdims *r) {
    for (int d = r->nd - 1; d >= 0; d--) {
        o->idx[d]++;
        o->off += r->strides[d];
        if (o->idx[d] < r->shape[d] || d == 0) return;
        o->off -= r->shape[d] * r->strides[d];
        o->idx[d] = 0;
    }
}

/* a: sum / product / extremum / mean (var) / max (logsumexp) / best value (arg);
 * b: M2 (var) or the scaled sum of exponentials (logsumexp); n: count (var); idx: arg position. */
typedef struct ts_cpu_fstate {
    double a, b;
    int64_t n, idx;
} ts_cpu_fstate;

typedef struct ts_cpu_istate {
    int64_t v, idx;
} ts_cpu_istate;

/* What a reduction path needs to know. */
typedef struct ts_cpu_rplan {
    ts_reduce_op op;
    const ts_kview *out;
    const char *base; /* in.data */
    ts_dtype dt;
    size_t es;
    ts_cpu_rdims lead, red; /* coalesced kept / reduced dims of the input */
    int64_t outputs, n;
    double corr;
    bool ints; /* integer accumulation */
} ts_cpu_rplan;

static inline bool ts_cpu_red_is_arg(ts_reduce_op op) {
    return op == TS_R_ARGMAX || op == TS_R_ARGMIN;
}

size_t tsi_cpu_red_elem_size(ts_dtype dt);
/* Drops size-1 dims and merges neighbours that are contiguous with each other; row-major linear
 * indices are unchanged. An empty or 0-dim input gives one dim (size 0 or 1). */
ts_cpu_rdims tsi_cpu_red_coalesce(int nd, const int64_t *shape, const int64_t *strides);
int64_t tsi_cpu_red_lin_offset(const ts_cpu_rdims *r, int64_t lin);
void tsi_cpu_red_odo_init(ts_cpu_odo *o, const ts_cpu_rdims *r, int64_t lin);
/* n elements at stride s (elements) from p, converted */
void tsi_cpu_red_conv_run_f64(double *dst, const char *p, ts_dtype dt, int64_t s, int64_t n);
void tsi_cpu_red_conv_run_i64(int64_t *dst, const char *p, ts_dtype dt, int64_t s, int64_t n);
/* Loads the reduced elements at positions pos .. pos+m-1 (row-major over r) from base into dd (as
 * double) or di (as int64). */
void tsi_cpu_red_fetch(double *dd, int64_t *di, const char *base, ts_dtype dt,
                       const ts_cpu_rdims *r, int64_t pos, int64_t m);

/* Writes outputs o0 .. o0+n-1 (row-major over out), converting to out's dtype. */
void tsi_cpu_red_store_run_d(const ts_kview *out, int64_t o0, const double *v, int64_t n);
void tsi_cpu_red_store_run_i(const ts_kview *out, int64_t o0, const int64_t *v, int64_t n);

ts_cpu_fstate tsi_cpu_red_fs_init(ts_reduce_op op);
ts_cpu_fstate tsi_cpu_red_lse_make(double m, double s);
/* Merges the partial R (later positions) into L (earlier positions). */
void tsi_cpu_red_fs_combine(ts_reduce_op op, ts_cpu_fstate *L, const ts_cpu_fstate *R);
/* Folds reduced positions [pos, pos + m <= RED_CHUNK) of a contiguous float32 run straight from the
 * input: sum and mean with tsi_cpu_red_fetch + tsi_cpu_red_fs_fold's bits, logsumexp (of float16
 * and bfloat16 runs too) with float exponentials summed in double (kern_reduce_state.c); false
 * (nothing done) for other ops, dtypes, layouts and logsumexp runs whose largest element is not
 * finite. */
bool tsi_cpu_red_fold_f32_run(ts_reduce_op op, ts_cpu_fstate *st, const char *base, ts_dtype dt,
                              const ts_cpu_rdims *r, int64_t pos, int64_t m);
/* Folds x[0..m), at reduced positions pos.., into st. */
void tsi_cpu_red_fs_fold(ts_reduce_op op, ts_cpu_fstate *st, const double *x, int64_t m,
                         int64_t pos);
/* The result (mean, var, ...; arg ops: the index) of a state; n is the full reduced count. */
double tsi_cpu_red_fs_finish(ts_reduce_op op, const ts_cpu_fstate *st, int64_t n, double corr);
/* Finishes and writes output o. */
void tsi_cpu_red_fs_store(ts_reduce_op op, const ts_kview *out, int64_t o, const ts_cpu_fstate *st,
                          int64_t n, double corr);
ts_cpu_istate tsi_cpu_red_is_init(ts_reduce_op op);
void tsi_cpu_red_is_combine(ts_reduce_op op, ts_cpu_istate *L, const ts_cpu_istate *R);
void tsi_cpu_red_is_fold(ts_reduce_op op, ts_cpu_istate *st, const int64_t *x, int64_t m,
                         int64_t pos);
void tsi_cpu_red_is_store(ts_reduce_op op, const ts_kview *out, int64_t o, const ts_cpu_istate *st);

/* kern_reduce_cols.c: the "reduce outer dims, keep a contiguous inner dim" path */
void tsi_cpu_red_cols(const ts_cpu_rplan *P);

#endif /* TS_CPU_KERN_REDUCE_H */
