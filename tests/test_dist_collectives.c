/* test_dist_collectives.c — the process group's collectives, run as a world of 1 and under mpiexec
 * with 2 and 4 ranks: every op (all_reduce sum/avg/min/max/product, broadcast from every rank,
 * reduce to every rank, all_gather, reduce_scatter, a send/recv ring, isend/irecv, the async forms
 * with wait and test) x every dtype x cpu and sim:R x sizes 0, 1, 37 x contiguous and strided
 * inputs; a buffer larger than a DDP bucket; the internal forms DDP uses; and the errors:
 * mismatched shapes, dtypes and collectives across ranks (each rank names the other), one rank's
 * own bad argument, src out of range, AVG on integers, a cuda tensor, subgroups and their
 * non-members, calls before init and init twice; Open MPI's idle waits set to yield when no core is
 * spare, a user's choice kept. Values are small integers per rank, so every expected result is
 * exact in every dtype; the test computes them itself. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "dist/dist_internal.h"
#include "ts_test.h"

static int R, W; /* this rank, the world's size */

static const ts_dtype DTYPES[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};
#define NDTYPES ((int)(sizeof DTYPES / sizeof *DTYPES))
static const int64_t SIZES[] = {0, 1, 37};
#define NSIZES   3
#define MAXN     160 /* 4 ranks x 37 elements, rounded up */
#define SENTINEL 3.0 /* what the gaps of a strided tensor hold (1 as bool): never touched */

static ts_device devices[2];
static int ndevices;

/* ------------------------------------------------------------------ helpers */
/* the value a dtype stores for v (bool: nonzero -> 1) */
static double as_dtype(ts_dtype dt, double v) { return dt == TS_BOOL ? (v != 0) : v; }

/* A tensor of n elements holding vals on dev; strided: every second element of a [2n] base whose
 * gaps hold SENTINEL (*base gets the base, else the tensor itself). In the current scope. */
static ts_tensor *make(ts_dtype dt, ts_device dev, int64_t n, const double *vals, bool strided,
                       ts_tensor **base) {
    double host[2 * MAXN + 2];
    if (!strided) {
        for (int64_t i = 0; i < n; i++) host[i] = vals[i];
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(n), host, (ts_opts){.dtype = dt, .device = dev});
        if (base) *base = t;
        return t;
    }
    for (int64_t i = 0; i < n; i++) {
        host[2 * i] = vals[i];
        host[2 * i + 1] = SENTINEL;
    }
    ts_tensor *b = ts_tensor_f64(TS_SHAPE(2 * n), host, (ts_opts){.dtype = dt, .device = dev});
    if (base) *base = b;
    return ts_slice(b, 0, 0, 2 * n, 2);
}

/* t's elements as doubles (any dtype, device, layout) */
static void read(ts_tensor *t, double *out, int64_t n) {
    CHECK_EQ(ts_numel(t), n);
    if (n == 0) return;
    ts_tensor *h = ts_to(ts_to_dtype(t, TS_F64), ts_cpu());
    CHECK(ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK);
}

/* the gaps of a strided base still hold SENTINEL */
static bool gaps_intact(ts_tensor *base, ts_dtype dt, int64_t n) {
    double b[2 * MAXN + 2];
    read(base, b, 2 * n);
    for (int64_t i = 0; i < n; i++)
        if (b[2 * i + 1] != as_dtype(dt, SENTINEL)) return false;
    return true;
}

static int mismatches(const double *got, const double *want, int64_t n, const char *what,
                      ts_dtype dt, ts_device dev, bool strided) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (bad++ < 3)
                fprintf(stderr, "rank %d: %s %s on %s (%s, n %lld): [%lld] got %g, want %g\n", R,
                        what, ts_dtype_name(dt), ts_device_str(dev),
                        strided ? "strided" : "contiguous", (long long)n, (long long)i, got[i],
                        want[i]);
        }
    return bad;
}

/* rank r's element i for each op (small integers: every result exact in every dtype) */
static double val_sum(int r, int64_t i) { return (double)((r + i) % 5 + 1); }
static double val_prod(int r, int64_t i) { return (double)((r + i) % 2 + 1); }
static double val_minmax(int r, int64_t i) { return (double)((r * 3 + i) % 7); }
static double val_bool(int r, int64_t i) { return (double)((r + i) % 3 == 0); }

static double rank_value(ts_dist_reduce_op op, ts_dtype dt, int r, int64_t i) {
    if (dt == TS_BOOL) return val_bool(r, i);
    switch (op) {
    case TS_DIST_PRODUCT:
        return val_prod(r, i);
    case TS_DIST_MIN:
    case TS_DIST_MAX:
        return val_minmax(r, i);
    default:
        return val_sum(r, i);
    }
}

/* the reduction over ranks [0, W) of rank_value, computed here (bool: or / and) */
static double expect_reduce(ts_dist_reduce_op op, ts_dtype dt, int64_t i) {
    double acc = rank_value(op, dt, 0, i);
    for (int r = 1; r < W; r++) {
        double v = rank_value(op, dt, r, i);
        switch (op) {
        case TS_DIST_SUM:
        case TS_DIST_AVG:
            acc += v;
            break;
        case TS_DIST_PRODUCT:
            acc *= v;
            break;
        case TS_DIST_MIN:
            acc = v < acc ? v : acc;
            break;
        case TS_DIST_MAX:
            acc = v > acc ? v : acc;
            break;
        }
    }
    if (op == TS_DIST_AVG) acc /= W;
    return as_dtype(dt, acc);
}

static const char *OPNAMES[] = {"sum", "avg", "product", "min", "max"};

/* ------------------------------------------------------------------ the table */
static void case_all_reduce(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    for (int op = TS_DIST_SUM; op <= TS_DIST_MAX; op++) {
        ts_scope_begin();
        double vals[MAXN], got[MAXN], want[MAXN];
        for (int64_t i = 0; i < n; i++) {
            vals[i] = rank_value(op, dt, R, i);
            want[i] = expect_reduce(op, dt, i);
        }
        ts_tensor *base, *t = make(dt, dev, n, vals, strided, &base);
        ts_status st = ts_dist_all_reduce(t, op, NULL);
        if (op == TS_DIST_AVG && !(dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16)) {
            CHECK_EQ(st, TS_ERR_DTYPE);
            CHECK(strstr(ts_error_message(), "all_reduce: AVG is only defined for floating") !=
                  NULL);
            ts_error_clear();
        } else {
            CHECK_EQ(st, TS_OK);
            read(t, got, n);
            char what[64];
            snprintf(what, sizeof what, "all_reduce %s", OPNAMES[op]);
            CHECK_EQ(mismatches(got, want, n, what, dt, dev, strided), 0);
            if (strided) CHECK(gaps_intact(base, dt, n));
        }
        CHECK_OK();
        ts_scope_end();
    }
}

static void case_broadcast(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    for (int src = 0; src < W; src++) {
        ts_scope_begin();
        double vals[MAXN], got[MAXN], want[MAXN];
        for (int64_t i = 0; i < n; i++) {
            vals[i] = as_dtype(dt, val_sum(R, i));
            want[i] = as_dtype(dt, val_sum(src, i));
        }
        ts_tensor *base, *t = make(dt, dev, n, vals, strided, &base);
        CHECK_EQ(ts_dist_broadcast(t, src, NULL), TS_OK);
        read(t, got, n);
        CHECK_EQ(mismatches(got, want, n, "broadcast", dt, dev, strided), 0);
        if (strided) CHECK(gaps_intact(base, dt, n));
        ts_scope_end();
    }
}

static void case_reduce(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    for (int dst = 0; dst < W; dst++) {
        ts_dist_reduce_op op = dst % 2 ? TS_DIST_MAX : TS_DIST_SUM;
        ts_scope_begin();
        double vals[MAXN], got[MAXN], want[MAXN];
        for (int64_t i = 0; i < n; i++) {
            vals[i] = as_dtype(dt, rank_value(op, dt, R, i));
            want[i] = R == dst ? expect_reduce(op, dt, i) : vals[i]; /* others keep theirs */
        }
        ts_tensor *base, *t = make(dt, dev, n, vals, strided, &base);
        CHECK_EQ(ts_dist_reduce(t, dst, op, NULL), TS_OK);
        read(t, got, n);
        CHECK_EQ(mismatches(got, want, n, "reduce", dt, dev, strided), 0);
        if (strided) CHECK(gaps_intact(base, dt, n));
        ts_scope_end();
    }
}

static void case_all_gather(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    ts_scope_begin();
    double vals[MAXN], got[MAXN], want[MAXN];
    for (int64_t i = 0; i < n; i++) vals[i] = as_dtype(dt, val_sum(R, i) + 2 * R);
    for (int r = 0; r < W; r++)
        for (int64_t i = 0; i < n; i++) want[r * n + i] = as_dtype(dt, val_sum(r, i) + 2 * r);
    ts_tensor *in = make(dt, dev, n, vals, strided, NULL);
    double zeros[MAXN] = {0};
    ts_tensor *obase, *out = make(dt, dev, W * n, zeros, strided, &obase);
    CHECK_EQ(ts_dist_all_gather(out, in, NULL), TS_OK);
    read(out, got, W * n);
    CHECK_EQ(mismatches(got, want, W * n, "all_gather", dt, dev, strided), 0);
    if (strided) CHECK(gaps_intact(obase, dt, W * n));
    /* in place: the input is this rank's block of the output */
    ts_tensor *o3 = ts_zeros(TS_SHAPE(W * n), (ts_opts){.dtype = dt, .device = dev});
    ts_tensor *mine = ts_narrow(o3, 0, R * n, n);
    ts_copy_(mine, make(dt, dev, n, vals, false, NULL));
    CHECK_EQ(ts_dist_all_gather(o3, mine, NULL), TS_OK);
    read(o3, got, W * n);
    CHECK_EQ(mismatches(got, want, W * n, "all_gather in place", dt, dev, strided), 0);
    /* out shaped [W, n] */
    ts_tensor *out2 = ts_zeros(TS_SHAPE(W, n), (ts_opts){.dtype = dt, .device = dev});
    CHECK_EQ(ts_dist_all_gather(out2, in, NULL), TS_OK);
    read(ts_reshape(out2, TS_SHAPE(W * n)), got, W * n);
    CHECK_EQ(mismatches(got, want, W * n, "all_gather [W, n]", dt, dev, strided), 0);
    ts_scope_end();
}

static void case_reduce_scatter(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    ts_dist_reduce_op ops[2] = {TS_DIST_SUM, TS_DIST_MAX};
    for (int k = 0; k < 2; k++) {
        ts_dist_reduce_op op = ops[k];
        ts_scope_begin();
        /* rank r's input block b, element i: rank_value(op, r, b * n + i) */
        double vals[MAXN], got[MAXN], want[MAXN];
        for (int64_t j = 0; j < W * n; j++) vals[j] = as_dtype(dt, rank_value(op, dt, R, j));
        for (int64_t i = 0; i < n; i++) want[i] = expect_reduce(op, dt, R * n + i);
        ts_tensor *in = make(dt, dev, W * n, vals, strided, NULL);
        double zeros[MAXN] = {0};
        ts_tensor *obase, *out = make(dt, dev, n, zeros, strided, &obase);
        CHECK_EQ(ts_dist_reduce_scatter(out, in, op, NULL), TS_OK);
        read(out, got, n);
        CHECK_EQ(mismatches(got, want, n, "reduce_scatter", dt, dev, strided), 0);
        if (strided) CHECK(gaps_intact(obase, dt, n));
        ts_scope_end();
    }
}

/* each rank sends to the next and receives from the previous: isend/irecv, then the blocking
 * forms ordered so that they cannot deadlock (even ranks send first) */
static void case_p2p(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    if (W == 1) return;
    int next = (R + 1) % W, prev = (R + W - 1) % W;
    ts_scope_begin();
    double vals[MAXN], got[MAXN], want[MAXN], zeros[MAXN] = {0};
    for (int64_t i = 0; i < n; i++) {
        vals[i] = as_dtype(dt, val_sum(R, i) + R);
        want[i] = as_dtype(dt, val_sum(prev, i) + prev);
    }
    ts_tensor *s = make(dt, dev, n, vals, strided, NULL);
    ts_tensor *rbase, *r = make(dt, dev, n, zeros, strided, &rbase);
    ts_dist_work *ws = ts_dist_isend(s, next, 5, NULL);
    ts_dist_work *wr = ts_dist_irecv(r, prev, 5, NULL);
    CHECK(ws && wr);
    CHECK_EQ(ts_dist_wait(wr), TS_OK);
    CHECK_EQ(ts_dist_wait(ws), TS_OK);
    read(r, got, n);
    CHECK_EQ(mismatches(got, want, n, "isend/irecv", dt, dev, strided), 0);
    if (strided) CHECK(gaps_intact(rbase, dt, n));
    ts_tensor *r2 = make(dt, dev, n, zeros, strided, NULL);
    if (R % 2 == 0) {
        CHECK_EQ(ts_dist_send(s, next, 6, NULL), TS_OK);
        CHECK_EQ(ts_dist_recv(r2, prev, 6, NULL), TS_OK);
    } else {
        CHECK_EQ(ts_dist_recv(r2, prev, 6, NULL), TS_OK);
        CHECK_EQ(ts_dist_send(s, next, 6, NULL), TS_OK);
    }
    read(r2, got, n);
    CHECK_EQ(mismatches(got, want, n, "send/recv", dt, dev, strided), 0);
    ts_scope_end();
}

/* several async all_reduces in flight, waited out of order; ts_dist_test polled until done */
static void case_async(ts_dtype dt, ts_device dev, int64_t n, bool strided) {
    ts_scope_begin();
    ts_dist_reduce_op ops[3] = {TS_DIST_SUM, TS_DIST_MAX, TS_DIST_PRODUCT};
    ts_tensor *ts[3];
    ts_dist_work *ws[3];
    for (int k = 0; k < 3; k++) {
        double vals[MAXN];
        for (int64_t i = 0; i < n; i++) vals[i] = rank_value(ops[k], dt, R, i);
        ts[k] = make(dt, dev, n, vals, strided, NULL);
        ws[k] = ts_dist_all_reduce_async(ts[k], ops[k], NULL);
        CHECK(ws[k] != NULL);
    }
    double vals[MAXN];
    for (int64_t i = 0; i < n; i++) vals[i] = as_dtype(dt, val_sum(R, i));
    ts_tensor *b = make(dt, dev, n, vals, strided, NULL);
    ts_dist_work *wb = ts_dist_broadcast_async(b, W - 1, NULL);
    while (!ts_dist_test(ws[1])) {
    }
    CHECK(ts_dist_test(ws[1])); /* stays true */
    int order[3] = {1, 2, 0};
    for (int j = 0; j < 3; j++) {
        int k = order[j];
        CHECK_EQ(ts_dist_wait(ws[k]), TS_OK);
        double got[MAXN], want[MAXN];
        for (int64_t i = 0; i < n; i++) want[i] = expect_reduce(ops[k], dt, i);
        read(ts[k], got, n);
        CHECK_EQ(mismatches(got, want, n, "all_reduce_async", dt, dev, strided), 0);
    }
    CHECK_EQ(ts_dist_wait(wb), TS_OK);
    double got[MAXN], want[MAXN];
    for (int64_t i = 0; i < n; i++) want[i] = as_dtype(dt, val_sum(W - 1, i));
    read(b, got, n);
    CHECK_EQ(mismatches(got, want, n, "broadcast_async", dt, dev, strided), 0);
    ts_scope_end();
}

static void table(void) {
    int before = ts_test_failed_count();
    for (int d = 0; d < ndevices; d++)
        for (int k = 0; k < NDTYPES; k++)
            for (int s = 0; s < NSIZES; s++)
                for (int strided = 0; strided < 2; strided++) {
                    ts_dtype dt = DTYPES[k];
                    int64_t n = SIZES[s];
                    case_all_reduce(dt, devices[d], n, strided);
                    case_broadcast(dt, devices[d], n, strided);
                    case_reduce(dt, devices[d], n, strided);
                    case_all_gather(dt, devices[d], n, strided);
                    case_reduce_scatter(dt, devices[d], n, strided);
                    case_p2p(dt, devices[d], n, strided);
                    case_async(dt, devices[d], n, strided);
                }
    if (R == 0)
        printf("table: %d devices x %d dtypes x %d sizes x contiguous/strided: %s\n", ndevices,
               NDTYPES, NSIZES, ts_test_failed_count() == before ? "ok" : "FAILED");
}

/* a transposed 2-D tensor (non-contiguous in another way than a slice) */
static void transposed(void) {
    ts_scope_begin();
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = val_sum(R, i);
    ts_tensor *a = ts_tensor_f64(TS_SHAPE(3, 4), v, (ts_opts){.dtype = TS_F32});
    ts_tensor *t = ts_transpose(a, 0, 1); /* [4, 3], strides (1, 4) */
    CHECK_EQ(ts_dist_all_reduce(t, TS_DIST_SUM, NULL), TS_OK);
    double got[12];
    read(a, got, 12);
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += got[i] != expect_reduce(TS_DIST_SUM, TS_F32, i);
    CHECK_EQ(bad, 0);
    ts_scope_end();
}

/* ------------------------------------------------------------------ larger than a DDP bucket */
static void large(void) {
    ts_scope_begin();
    const int64_t n = 7 * 1000 * 1000 + 3; /* 28 MB of f32 (> 25 MiB) */
    ts_tensor *t = ts_full(TS_SHAPE(n), R + 1, (ts_opts){0});
    CHECK_EQ(ts_dist_all_reduce(t, TS_DIST_SUM, NULL), TS_OK);
    CHECK_NEAR(ts_item(ts_min(t)), W * (W + 1) / 2, 0);
    CHECK_NEAR(ts_item(ts_max(t)), W * (W + 1) / 2, 0);
    CHECK_EQ(ts_dist_all_reduce(t, TS_DIST_AVG, NULL), TS_OK);
    CHECK_NEAR(ts_item(ts_min(t)), W * (W + 1) / 2.0, 0);
    ts_tensor *b = ts_full(TS_SHAPE(n), R, (ts_opts){0});
    CHECK_EQ(ts_dist_broadcast(b, W - 1, NULL), TS_OK);
    CHECK_NEAR(ts_item(ts_min(b)), W - 1, 0);
    CHECK_NEAR(ts_item(ts_max(b)), W - 1, 0);
    /* bf16 at the same byte size: the user op in float */
    ts_tensor *h = ts_full(TS_SHAPE(2 * n), R + 1, (ts_opts){.dtype = TS_BF16});
    CHECK_EQ(ts_dist_all_reduce(h, TS_DIST_SUM, NULL), TS_OK);
    CHECK_NEAR(ts_item(ts_min(h)), W * (W + 1) / 2, 0);
    CHECK_NEAR(ts_item(ts_max(h)), W * (W + 1) / 2, 0);
    /* the DDP form, async, on the same buffer */
    ts_dist_work *w = tsi_dist_all_reduce_unchecked(t, TS_DIST_SUM, NULL);
    CHECK_EQ(ts_dist_wait(w), TS_OK);
    CHECK_NEAR(ts_item(ts_max(t)), W * W * (W + 1) / 2.0, 0);
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ internal forms */
static void internal_forms(void) {
    ts_scope_begin();
    double v[6];
    for (int i = 0; i < 6; i++) v[i] = R * 6 + i;
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(6), v, (ts_opts){.dtype = TS_F32});
    ts_dist_work *w = tsi_dist_all_reduce_unchecked(t, TS_DIST_AVG, NULL);
    CHECK(w != NULL);
    CHECK_EQ(ts_dist_wait(w), TS_OK);
    CHECK(tsi_dist_work_busy_s(w = tsi_dist_all_reduce_unchecked(t, TS_DIST_SUM, NULL)) >= 0);
    CHECK_EQ(ts_dist_wait(w), TS_OK);
    double got[6];
    read(t, got, 6);
    int bad = 0;
    for (int i = 0; i < 6; i++) bad += got[i] != W * (6.0 * (W - 1) / 2 + i);
    CHECK_EQ(bad, 0);
    /* broadcast from the last rank */
    for (int i = 0; i < 6; i++) v[i] = R + i;
    ts_tensor *b = ts_tensor_f64(TS_SHAPE(6), v, (ts_opts){0});
    CHECK_EQ(tsi_dist_broadcast_unchecked(b, W - 1, NULL), TS_OK);
    read(b, got, 6);
    bad = 0;
    for (int i = 0; i < 6; i++) bad += got[i] != W - 1 + i;
    CHECK_EQ(bad, 0);
    /* raw bytes in group-rank order, also zero bytes */
    struct {
        int rank;
        char tag[12];
    } me = {R, "hello"}, all[8];
    memset(all, 0, sizeof all);
    CHECK_EQ(tsi_dist_all_gather_bytes(&me, sizeof me, all, NULL), TS_OK);
    bad = 0;
    for (int r = 0; r < W; r++) bad += all[r].rank != r || strcmp(all[r].tag, "hello") != 0;
    CHECK_EQ(bad, 0);
    CHECK_EQ(tsi_dist_all_gather_bytes(NULL, 0, NULL, NULL), TS_OK);
    CHECK_EQ(tsi_dist_group_world_rank(NULL, W - 1), W - 1);
    CHECK_EQ(tsi_dist_group_world_rank(NULL, W), -1);
    /* busy time of a finished item */
    w = tsi_dist_all_reduce_unchecked(t, TS_DIST_SUM, NULL);
    while (!ts_dist_test(w)) {
    }
    CHECK(tsi_dist_work_busy_s(w) >= 0 && tsi_dist_work_busy_s(w) < 60);
    CHECK_EQ(ts_dist_wait(w), TS_OK);
    double busy = -1;
    CHECK_EQ(tsi_dist_wait_busy(tsi_dist_all_reduce_unchecked(t, TS_DIST_MAX, NULL), &busy), TS_OK);
    CHECK(busy >= 0 && busy < 60);
    CHECK_EQ(tsi_dist_wait_busy(NULL, &busy), TS_OK);
    CHECK_EQ(busy, 0);
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ errors */
static void expect_err(ts_status got, ts_status want, const char *must_contain, int line) {
    bool ok = got == want && ts_error() == want && strstr(ts_error_message(), must_contain);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, line, "rank %d: expected %s containing \"%s\", got %s: %s", R,
                      ts_status_string(want), must_contain, ts_status_string(got),
                      ts_error_message());
    ts_error_clear();
}
#define EXPECT_ERR(got, want, text) expect_err((got), (want), (text), __LINE__)

/* after an error the next collective still works */
static void still_works(void) {
    ts_scope_begin();
    ts_tensor *t = ts_full(TS_SHAPE(3), 1, (ts_opts){0});
    CHECK_EQ(ts_dist_all_reduce(t, TS_DIST_SUM, NULL), TS_OK);
    CHECK_NEAR(ts_item(ts_sum(t)), 3 * W, 0);
    ts_scope_end();
}

static void errors_across_ranks(void) {
    if (W < 2) return;
    char want[256];
    ts_scope_begin();
    /* rank 1 passes [3, 5], the others [3, 4] */
    ts_tensor *t = ts_zeros(R == 1 ? TS_SHAPE(3, 5) : TS_SHAPE(3, 4), (ts_opts){0});
    if (R == 1)
        snprintf(want, sizeof want,
                 "all_reduce: rank 0 passed float32 [3, 4] but rank 1 passed "
                 "float32 [3, 5]");
    else
        snprintf(want, sizeof want,
                 "all_reduce: rank 1 passed float32 [3, 5] but rank %d passed "
                 "float32 [3, 4]",
                 R);
    EXPECT_ERR(ts_dist_all_reduce(t, TS_DIST_SUM, NULL), TS_ERR_SHAPE, want);
    still_works();
    /* the async form reports it at wait */
    ts_dist_work *w = ts_dist_all_reduce_async(t, TS_DIST_SUM, NULL);
    CHECK(w != NULL);
    EXPECT_ERR(ts_dist_wait(w), TS_ERR_SHAPE, want);
    still_works();

    /* dtypes: the last rank passes float64 */
    ts_tensor *d = ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = R == W - 1 ? TS_F64 : TS_F32});
    if (R == W - 1)
        snprintf(want, sizeof want,
                 "broadcast: rank 0 passed float32 [2] but rank %d passed "
                 "float64 [2]",
                 R);
    else
        snprintf(want, sizeof want,
                 "broadcast: rank %d passed float64 [2] but rank %d passed "
                 "float32 [2]",
                 W - 1, R);
    EXPECT_ERR(ts_dist_broadcast(d, 0, NULL), TS_ERR_DTYPE, want);
    still_works();

    /* different collectives: rank 0 broadcasts, the others all-reduce */
    ts_tensor *c = ts_zeros(TS_SHAPE(2), (ts_opts){0});
    ts_status st =
        R == 0 ? ts_dist_broadcast(c, 0, NULL) : ts_dist_all_reduce(c, TS_DIST_SUM, NULL);
    EXPECT_ERR(st, TS_ERR_DIST,
               R == 0 ? "broadcast: rank 1 called all_reduce but rank 0 called "
                        "broadcast"
                      : "called broadcast but rank");
    still_works();

    /* different ops, different src */
    EXPECT_ERR(ts_dist_all_reduce(c, R == 0 ? TS_DIST_MAX : TS_DIST_SUM, NULL), TS_ERR_ARG,
               R == 0 ? "all_reduce: rank 1 passed op sum but rank 0 passed op max"
                      : "all_reduce: rank 0 passed op max but rank");
    EXPECT_ERR(ts_dist_broadcast(c, R == 0 ? 1 : 0, NULL), TS_ERR_ARG,
               R == 0 ? "broadcast: rank 1 passed src 0 but rank 0 passed src 1" : "passed src");
    still_works();

    /* one rank's own bad argument fails every rank (nobody is left inside the collective) */
    st = ts_dist_broadcast(c, R == W - 1 ? W + 3 : 0, NULL);
    snprintf(want, sizeof want, "broadcast: src %d is not a rank of the world (world size %d)",
             W + 3, W);
    EXPECT_ERR(st, TS_ERR_ARG, want);
    still_works();

    /* all_gather / reduce_scatter: output shapes differ across ranks but each is locally fine?
     * (here the in sizes differ: every rank's numel relation fails or the shapes differ) */
    ts_tensor *in = ts_zeros(TS_SHAPE(R == 0 ? 2 : 3), (ts_opts){0});
    ts_tensor *out = ts_zeros(TS_SHAPE(W * (R == 0 ? 2 : 3)), (ts_opts){0});
    EXPECT_ERR(ts_dist_all_gather(out, in, NULL), TS_ERR_SHAPE, "all_gather: rank ");
    still_works();
    ts_scope_end();
}

static void local_errors(void) {
    ts_scope_begin();
    ts_tensor *t = ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_I64});
    EXPECT_ERR(ts_dist_all_reduce(t, TS_DIST_AVG, NULL), TS_ERR_DTYPE,
               "all_reduce: AVG is only defined for floating dtypes, but got int64 [4] on cpu");
    EXPECT_ERR(ts_dist_reduce_scatter(ts_zeros(TS_SHAPE(1), (ts_opts){.dtype = TS_I32}),
                                      ts_zeros(TS_SHAPE(W), (ts_opts){.dtype = TS_I32}),
                                      TS_DIST_AVG, NULL),
               TS_ERR_DTYPE, "reduce_scatter: AVG is only defined for floating dtypes");
    char want[160];
    snprintf(want, sizeof want, "broadcast: src %d is not a rank of the world (world size %d)", W,
             W);
    EXPECT_ERR(ts_dist_broadcast(t, W, NULL), TS_ERR_ARG, want);
    EXPECT_ERR(ts_dist_reduce(t, -1, TS_DIST_SUM, NULL), TS_ERR_ARG,
               "reduce: dst -1 is not a rank of the world");
    EXPECT_ERR(ts_dist_send(t, R, 0, NULL), TS_ERR_ARG, "is this process's own rank");
    EXPECT_ERR(ts_dist_recv(t, W + 1, 0, NULL), TS_ERR_ARG, "recv: src");
    if (W > 1) EXPECT_ERR(ts_dist_send(t, (R + 1) % W, -2, NULL), TS_ERR_ARG, "tag must be >= 0");
    /* numel relations, checked locally first */
    ts_tensor *in = ts_zeros(TS_SHAPE(3), (ts_opts){0});
    snprintf(want, sizeof want,
             "all_gather: the output float32 [%d] on cpu must hold %d (the group "
             "size) times the elements of the input float32 [3] on cpu",
             3 * W + 1, W);
    EXPECT_ERR(ts_dist_all_gather(ts_zeros(TS_SHAPE(3 * W + 1), (ts_opts){0}), in, NULL),
               TS_ERR_SHAPE, want);
    EXPECT_ERR(ts_dist_reduce_scatter(ts_zeros(TS_SHAPE(2), (ts_opts){0}), in, TS_DIST_SUM, NULL),
               W == 1 ? TS_ERR_SHAPE : TS_ERR_SHAPE, "reduce_scatter: the input float32 [3]");
    EXPECT_ERR(ts_dist_all_gather(ts_zeros(TS_SHAPE(3 * W), (ts_opts){.dtype = TS_F64}), in, NULL),
               TS_ERR_DTYPE, "all_gather: output float64");
    EXPECT_ERR(ts_dist_all_reduce(NULL, TS_DIST_SUM, NULL), TS_ERR_ARG,
               "all_reduce: tensor is NULL");
    EXPECT_ERR(ts_dist_all_reduce(t, (ts_dist_reduce_op)42, NULL), TS_ERR_ARG,
               "all_reduce: unknown reduce op 42");
    /* a pending error is kept (first wins) and returned */
    ts_zeros(TS_SHAPE(-2), (ts_opts){0});
    ts_status first = ts_error();
    CHECK(first != TS_OK);
    CHECK_EQ(ts_dist_all_reduce(NULL, TS_DIST_SUM, NULL), first);
    ts_error_clear();
    CHECK_EQ(ts_dist_wait(NULL), TS_OK);
    CHECK(ts_dist_test(NULL));
    still_works();

    /* a cuda tensor: this test builds one by hand (there may be no GPU): its storage says cuda */
    ts_tensor *h = ts_zeros(TS_SHAPE(2), (ts_opts){0});
    ts_storage fake_s = *h->storage;
    fake_s.device = (ts_device){TS_CUDA, 0};
    atomic_init(&fake_s.refs, 1000);
    ts_tensor fake = *h;
    atomic_init(&fake.refs, 1000);
    fake.storage = &fake_s;
    ts_status st = ts_dist_all_reduce(&fake, TS_DIST_SUM, NULL);
    /* without NCCL: TS_ERR_UNSUPPORTED saying so; with NCCL but no GPU: NCCL's or CUDA's error; a
     * world of one with NCCL moves nothing and may succeed */
    bool cuda_err = st != TS_OK && (strstr(ts_error_message(), "cuda") != NULL ||
                                    strstr(ts_error_message(), "NCCL") != NULL);
    if (st == TS_ERR_UNSUPPORTED)
        CHECK(strstr(ts_error_message(),
                     "need NCCL (and MPI), which this Tessera was built without") != NULL);
    if (!(cuda_err || (W == 1 && st == TS_OK)))
        ts_test_failf(__FILE__, __LINE__, "rank %d: a cuda tensor: %s: %s", R, ts_status_string(st),
                      ts_error_message());
    ts_test_record(cuda_err || (W == 1 && st == TS_OK));
    if (R == 0) printf("a cuda tensor: %s\n", ts_error_message());
    ts_error_clear();
    still_works();
    ts_scope_end();
}

/* ------------------------------------------------------------------ subgroups */
static void subgroups(void) {
    int evens[4], ne = 0;
    for (int r = 0; r < W; r += 2) evens[ne++] = r;
    ts_dist_group *g = ts_dist_group_new(evens, ne);
    CHECK(g != NULL);
    CHECK_OK();
    bool member = R % 2 == 0;
    CHECK_EQ(ts_dist_group_size(g), ne);
    CHECK_EQ(ts_dist_group_rank(g), member ? R / 2 : -1);
    for (int i = 0; i < ne; i++) CHECK_EQ(tsi_dist_group_world_rank(g, i), 2 * i);
    ts_scope_begin();
    ts_tensor *t = ts_full(TS_SHAPE(5), R + 1, (ts_opts){.device = devices[ndevices - 1]});
    if (member) {
        double want = 0;
        for (int i = 0; i < ne; i++) want += evens[i] + 1;
        CHECK_EQ(ts_dist_all_reduce(t, TS_DIST_SUM, g), TS_OK);
        CHECK_NEAR(ts_item(ts_max(t)), want, 0);
        CHECK_NEAR(ts_item(ts_min(t)), want, 0);
        /* src is a WORLD rank: the last even rank */
        ts_tensor *b = ts_full(TS_SHAPE(3), R, (ts_opts){0});
        CHECK_EQ(ts_dist_broadcast(b, evens[ne - 1], g), TS_OK);
        CHECK_NEAR(ts_item(ts_min(b)), evens[ne - 1], 0);
        ts_tensor *o = ts_zeros(TS_SHAPE(ne, 3), (ts_opts){0});
        CHECK_EQ(ts_dist_all_gather(o, ts_full(TS_SHAPE(3), R, (ts_opts){0}), g), TS_OK);
        double got[12];
        read(o, got, 3 * ne);
        int bad = 0;
        for (int i = 0; i < 3 * ne; i++) bad += got[i] != evens[i / 3];
        CHECK_EQ(bad, 0);
        ts_dist_work *w = ts_dist_all_reduce_async(t, TS_DIST_MAX, g);
        CHECK_EQ(ts_dist_wait(w), TS_OK);
        if (W > 1) {
            EXPECT_ERR(ts_dist_broadcast(b, 1, g), TS_ERR_ARG,
                       "broadcast: src 1 is not a member of group 1 (world ranks 0");
        }
        int me = R, all[4] = {0};
        CHECK_EQ(tsi_dist_all_gather_bytes(&me, sizeof me, all, g), TS_OK);
        for (int i = 0; i < ne; i++) CHECK_EQ(all[i], evens[i]);
    } else {
        char want[160];
        snprintf(want, sizeof want,
                 "all_reduce: this process (world rank %d) is not a member of "
                 "group 1 (world ranks %s)",
                 R, W == 4 ? "0, 2" : "0");
        EXPECT_ERR(ts_dist_all_reduce(t, TS_DIST_SUM, g), TS_ERR_ARG, want);
        CHECK(ts_dist_all_reduce_async(t, TS_DIST_SUM, g) == NULL);
        CHECK_ERR(TS_ERR_ARG);
    }
    /* world collectives keep working beside the group */
    still_works();
    ts_scope_end();
    ts_dist_group_free(g);

    /* a second group with every rank, in reverse order (sorted, as PyTorch) */
    int rev[4];
    for (int i = 0; i < W; i++) rev[i] = W - 1 - i;
    ts_dist_group *all = ts_dist_group_new(rev, W);
    CHECK(all != NULL);
    CHECK_EQ(ts_dist_group_rank(all), R);
    ts_scope_begin();
    ts_tensor *t2 = ts_full(TS_SHAPE(2), 2, (ts_opts){.dtype = TS_BF16});
    CHECK_EQ(ts_dist_all_reduce(t2, TS_DIST_PRODUCT, all), TS_OK);
    CHECK_NEAR(ts_item(ts_max(t2)), 1 << W, 0);
    ts_scope_end();
    /* left for ts_dist_finalize to free */

    /* bad lists */
    int bad_list[2] = {0, W};
    CHECK(ts_dist_group_new(bad_list, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    int dup[2] = {0, 0};
    CHECK(ts_dist_group_new(dup, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    if (W > 1) {
        /* ranks disagree on the list */
        int mine[1] = {R == 0 ? 0 : 1};
        CHECK(ts_dist_group_new(mine, 1) == NULL);
        char want[160];
        snprintf(want, sizeof want, "new_group: rank %d passed world ranks [%d] but rank %d passed",
                 R == 0 ? 1 : 0, R == 0 ? 1 : 0, R);
        bool ok = ts_error() == TS_ERR_ARG && strstr(ts_error_message(), want);
        CHECK(ok);
        if (!ok) fprintf(stderr, "rank %d: %s\n", R, ts_error_message());
        ts_error_clear();
    }
    still_works();
}

/* ------------------------------------------------------------------ before init, describe */
static void before_init(void) {
    CHECK(!ts_dist_is_initialized());
    CHECK_EQ(ts_dist_rank(), 0);
    CHECK_EQ(ts_dist_world_size(), 1);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    CHECK_EQ(ts_dist_local_rank(), lr ? atoi(lr) : 0);
    ts_tensor *t = ts_zeros(TS_SHAPE(2), (ts_opts){0});
    EXPECT_ERR(ts_dist_all_reduce(t, TS_DIST_SUM, NULL), TS_ERR_STATE,
               "all_reduce: call ts_dist_init first");
    EXPECT_ERR(ts_dist_barrier(), TS_ERR_STATE, "barrier: call ts_dist_init first");
    CHECK(ts_dist_all_reduce_async(t, TS_DIST_SUM, NULL) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    EXPECT_ERR(ts_dist_finalize(), TS_ERR_STATE, "ts_dist_finalize: call ts_dist_init first");
    CHECK(strstr(ts_dist_describe(), "not initialized") != NULL);
    EXPECT_ERR(ts_dist_init((ts_dist_opts){.timeout_s = -1}), TS_ERR_ARG, "timeout_s");
    if (!ts_dist_is_available() && !getenv("OMPI_COMM_WORLD_SIZE")) {
        /* built without MPI: a launcher asking for more ranks is refused */
        setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
        tsi_env_reload(TSI_ENV_OMPI_COMM_WORLD_SIZE);
        EXPECT_ERR(ts_dist_init((ts_dist_opts){0}), TS_ERR_UNSUPPORTED,
                   "ts_dist_init: the launcher asked for 3 ranks (OMPI_COMM_WORLD_SIZE=3) but this "
                   "Tessera was built without MPI");
        CHECK(!ts_dist_is_initialized());
        unsetenv("OMPI_COMM_WORLD_SIZE");
        tsi_env_reload(TSI_ENV_OMPI_COMM_WORLD_SIZE);
    }
    ts_release(t);
}

/* Open MPI's idle waits (process_group.c): ts_dist_init joining MPI on a machine whose compute
 * threads fill every core sets mpi_yield_when_idle, unless the user chose (a value already in the
 * environment stays: ctest's _np2_spin run); a world of one without a launcher leaves it alone.
 * The threads are raised to the cores first (0: all), so that no core is spare on any machine
 * with OpenMP. */
#define YIELD_VAR "OMPI_MCA_mpi_yield_when_idle"
static ts_status init_checking_yield(void) {
    const char *u = getenv(YIELD_VAR);
    char user[32] = "";
    if (u) snprintf(user, sizeof user, "%s", u);
    const int threads = ts_get_num_threads();
    ts_set_num_threads(0);
    const bool spare = tsi_dist_core_spare(ts_dist_local_world_size());
    ts_status st = ts_dist_init((ts_dist_opts){0});
    ts_set_num_threads(threads);
    const char *now = getenv(YIELD_VAR);
    if (u)
        CHECK(now && !strcmp(now, user));
    else if (st == TS_OK && getenv("OMPI_COMM_WORLD_SIZE") && !spare)
        CHECK(now && !strcmp(now, "1"));
    else
        CHECK(now == NULL);
    return st;
}

int main(void) {
    before_init();
    if (init_checking_yield() == TS_ERR_UNSUPPORTED && !ts_dist_is_available())
        return ts_test_skip("%s", ts_error_message()); /* a launcher, and no MPI built */
    CHECK_OK();
    EXPECT_ERR(ts_dist_init((ts_dist_opts){0}), TS_ERR_STATE,
               "ts_dist_init: trying to initialize the default process group twice!");
    R = ts_dist_rank();
    W = ts_dist_world_size();
    CHECK(ts_dist_is_initialized());
    CHECK(W <= 4);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    CHECK_EQ(ts_dist_local_rank(), lr ? atoi(lr) : 0);
    CHECK(ts_dist_local_world_size() >= 1);
    const char *d = ts_dist_describe();
    char want[64];
    snprintf(want, sizeof want, "world %d, rank %d (local ", W, R);
    CHECK(strncmp(d, want, strlen(want)) == 0);
#ifdef TS_HAVE_MPI
    CHECK(ts_dist_is_available());
    if (W > 1) CHECK(strstr(d, "backend mpi (") != NULL);
#else
    CHECK(!ts_dist_is_available());
#endif
    if (R == 0) printf("%s\n", d);

    devices[ndevices++] = ts_cpu();
    if (ts_device_count(TS_SIM) == 0) ts_sim_configure(4, 0);
    devices[ndevices++] = ts_sim(R % ts_device_count(TS_SIM));

    table();
    transposed();
    internal_forms();
    local_errors();
    errors_across_ranks();
    subgroups();
    large();
    CHECK_EQ(ts_dist_barrier(), TS_OK);
    CHECK_OK();
    int failed = ts_test_failed_count(), passed = ts_test_passed_count();
    CHECK_EQ(ts_dist_finalize(), TS_OK);
    CHECK(!ts_dist_is_initialized());
    CHECK_EQ(ts_dist_world_size(), 1);
    printf("rank %d of %d: %d passed, %d failed before finalize\n", R, W, passed, failed);
    return ts_test_finish();
}
