/* test_op_tables.c — the op families' lists (src/backend/unary_ops.def, binary_ops.def,
 * reduce_ops.def) against what the library does with each row: its front end exists and records the
 * grad_fn the row names, its dtype rule holds on int32 and bool inputs, autocast applies its column
 * to its name and lists no name twice, and the exporter writes the row's ONNX operator, finds an
 * emitter for an OWN row and none for a NO row. A row that lies about any of these fails here. */
#include <string.h>

#include "amp/autocast.h"
#include "backend/kernel_args.h"
#ifdef TS_HAVE_ONNX
#include "onnx/export_internal.h"
#endif
#include "ts_test.h"

typedef ts_tensor *(*unary_fn)(ts_tensor *);

typedef struct row {
    ts_unary_op id;
    const char *name, *front, *dtype, *grad_fn, *onnx;
    int autocast;
    unary_fn fn; /* ts_<name> for PLAIN, PLAIN_INPLACE and SPECIAL rows */
} row;

#define OWN                    "OWN"
#define NO                     "NO"
#define NONE                   TSI_AC_NONE
#define FP32                   TSI_AC_FP32
#define FN_PLAIN(name)         ts_##name
#define FN_PLAIN_INPLACE(name) ts_##name
#define FN_SPECIAL(name)       ts_##name
#define FN_OWN(name)           NULL
static const row rows[] = {
#define X(ID, name, front, dtype, grad_fn, autocast, autocast_cpu, onnx)                           \
    {TS_U_##ID, #name, #front, #dtype, grad_fn, onnx, autocast, FN_##front(name)},
#include "backend/unary_ops.def"
#undef X
};
#define N_ROWS (sizeof rows / sizeof rows[0])

typedef ts_tensor *(*binary_fn)(ts_tensor *, ts_tensor *);
typedef struct brow {
    ts_binary_op id;
    const char *name, *front, *dtype, *grad_fn, *onnx;
    int autocast;
    binary_fn fn; /* ts_<name> for PLAIN, PLAIN_INPLACE and BITWISE rows */
} brow;
#define FN_BITWISE(name) ts_##name
#define FN_SCALAR(name)  NULL
#define FN_KERNEL(name)  NULL
static const brow brows[] = {
#define X(ID, name, front, dtype, grad_fn, autocast, autocast_cpu, onnx)                           \
    {TS_B_##ID, #name, #front, #dtype, grad_fn, onnx, autocast, FN_##front(name)},
#include "backend/binary_ops.def"
#undef X
};
#define N_BROWS (sizeof brows / sizeof brows[0])

typedef struct rrow {
    ts_reduce_op id;
    const char *name, *name_dim, *dtype, *grad_fn, *grad_fn_dim, *onnx;
    int autocast;
} rrow;
static const rrow rrows[] = {
#define X(ID, name, name_dim, dtype, grad_fn, grad_fn_dim, autocast, autocast_cpu, onnx)           \
    {TS_R_##ID, #name, #name_dim, #dtype, grad_fn, grad_fn_dim, onnx, autocast},
#include "backend/reduce_ops.def"
#undef X
};
#define N_RROWS (sizeof rrows / sizeof rrows[0])

/* the front ends of a reduction over everything and over dim 0 (NULL: none of that form) */
static ts_tensor *reduce_all(ts_reduce_op id, ts_tensor *t) {
    switch (id) {
    case TS_R_SUM:
        return ts_sum(t);
    case TS_R_PROD:
        return ts_prod(t);
    case TS_R_MEAN:
        return ts_mean(t);
    case TS_R_MAX:
        return ts_max(t);
    case TS_R_MIN:
        return ts_min(t);
    case TS_R_VAR:
        return ts_var(t);
    case TS_R_STD:
        return ts_std(t);
    case TS_R_LOGSUMEXP:
        return ts_logsumexp(t);
    case TS_R_ARGMAX:
        return ts_argmax(t);
    case TS_R_ARGMIN:
        return ts_argmin(t);
    default:
        return NULL; /* norm2: linalg.vector_norm's */
    }
}
static ts_tensor *reduce_dim(ts_reduce_op id, ts_tensor *t) {
    switch (id) {
    case TS_R_SUM:
        return ts_sum_dim(t, 0, false);
    case TS_R_PROD:
        return ts_prod_dim(t, 0, false);
    case TS_R_MEAN:
        return ts_mean_dim(t, 0, false);
    case TS_R_MAX:
        return ts_amax_dim(t, 0, false);
    case TS_R_MIN:
        return ts_amin_dim(t, 0, false);
    case TS_R_VAR:
        return ts_var_dim(t, 0, false, 1);
    case TS_R_STD:
        return ts_std_dim(t, 0, false, 1);
    case TS_R_LOGSUMEXP:
        return ts_logsumexp_dim(t, 0, false);
    case TS_R_ARGMAX:
        return ts_argmax_dim(t, 0, false);
    case TS_R_ARGMIN:
        return ts_argmin_dim(t, 0, false);
    default:
        return NULL;
    }
}

/* the enum is the list's order, and every op has a row */
static void test_order(void) {
    CHECK_EQ(N_ROWS, TS_U_COUNT);
    for (size_t i = 0; i < N_ROWS; i++) CHECK_EQ(rows[i].id, i);
    CHECK_EQ(N_BROWS, TS_B_COUNT);
    for (size_t i = 0; i < N_BROWS; i++) CHECK_EQ(brows[i].id, i);
    CHECK_EQ(N_RROWS, TS_R_COUNT);
    for (size_t i = 0; i < N_RROWS; i++) CHECK_EQ(rrows[i].id, i);
}

static void check_grad_fn(const char *what, ts_tensor *y, const char *want) {
    const char *got = y ? ts_grad_fn_name(y) : NULL;
    const bool ok = y && (want ? got && !strcmp(got, want) : got == NULL);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: grad_fn %s, the row says %s%s", what,
                      got ? got : "(none)", want ? want : "(none)", ts_test_error_str());
    ts_error_clear();
}

/* reductions: both forms record the row's grad_fn names; the dtype column on int32 input */
static void test_reduce_rows(void) {
    for (size_t i = 0; i < N_RROWS; i++) {
        const rrow *r = &rrows[i];
        ts_scope_begin();
        ts_tensor *x = ts_rand(TS_SHAPE(3, 4), (ts_opts){0});
        ts_set_requires_grad(x, true);
        ts_tensor *ya = reduce_all(r->id, x), *yd = reduce_dim(r->id, x);
        if (r->id == TS_R_NORM2) {
            CHECK(ya == NULL && yd == NULL);
        } else {
            check_grad_fn(r->name, ya, r->grad_fn);
            check_grad_fn(r->name_dim, yd, r->grad_fn_dim);
            const int32_t iv[4] = {3, 1, 4, 1};
            ts_tensor *yi = reduce_all(r->id, ts_from_data(TS_SHAPE(4), TS_I32, iv, (ts_opts){0}));
            const char *d = r->dtype;
            const bool want_err = !strcmp(d, "MEAN") || !strcmp(d, "VAR");
            const ts_dtype want = !strcmp(d, "SUM") || !strcmp(d, "INDEX") ? TS_I64
                                  : !strcmp(d, "TO_FLOAT")                 ? TS_F32
                                                                           : TS_I32;
            const bool ok = want_err ? yi == NULL : yi && ts_dtype_of(yi) == want;
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s (%s): int32 -> %s", r->name, d,
                              yi ? ts_dtype_name(ts_dtype_of(yi)) : "error");
            ts_error_clear();
        }
        ts_scope_end();
    }
}

/* binary rows: the front end records the row's grad_fn, and the dtype column holds on int32 and
 * bool operands (PyTorch's results) */
static void test_binary_rows(void) {
    for (size_t i = 0; i < N_BROWS; i++) {
        const brow *r = &brows[i];
        const bool has_front = !strcmp(r->front, "PLAIN") || !strcmp(r->front, "PLAIN_INPLACE") ||
                               !strcmp(r->front, "BITWISE");
        CHECK(has_front == (r->fn != NULL));
        if (!r->fn) continue;
        ts_scope_begin();
        if (strcmp(r->front, "BITWISE") != 0) {
            ts_tensor *a = ts_add_scalar(ts_rand(TS_SHAPE(4), (ts_opts){0}), 0.5);
            ts_tensor *b = ts_add_scalar(ts_rand(TS_SHAPE(4), (ts_opts){0}), 0.5);
            ts_set_requires_grad(a, true);
            ts_set_requires_grad(b, true);
            ts_tensor *y = r->fn(a, b);
            const char *got = y ? ts_grad_fn_name(y) : NULL;
            const bool ok = y && (r->grad_fn ? got && !strcmp(got, r->grad_fn) : got == NULL);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s: grad_fn %s, the row says %s%s", r->name,
                              got ? got : "(none)", r->grad_fn ? r->grad_fn : "(none)",
                              ts_test_error_str());
            ts_error_clear();
        }
        const int32_t iv[3] = {3, 2, 5};
        const bool bv[3] = {true, false, true};
        ts_tensor *xi = ts_from_data(TS_SHAPE(3), TS_I32, iv, (ts_opts){0});
        ts_tensor *xb = ts_from_data(TS_SHAPE(3), TS_BOOL, bv, (ts_opts){0});
        ts_tensor *yi = r->fn(xi, xi);
        const bool int_err = yi == NULL;
        ts_error_clear();
        ts_tensor *yb = r->fn(xb, xb);
        const bool bool_err = yb == NULL;
        ts_error_clear();
        const char *d = r->dtype;
        ts_dtype want_i = TS_I32, want_b = TS_BOOL;
        bool want_int_err = false, want_bool_err = false;
        if (!strcmp(d, "TO_FLOAT")) {
            want_i = want_b = TS_F32;
        } else if (!strcmp(d, "BOOL_OUT")) {
            want_i = TS_BOOL;
        } else if (!strcmp(d, "SUB") || !strcmp(d, "NO_BOOL")) {
            want_bool_err = true;
        } else if (!strcmp(d, "FLOAT_ONLY")) {
            want_int_err = want_bool_err = true;
        }
        if (!strcmp(r->name, "bitwise_left_shift") || !strcmp(r->name, "bitwise_right_shift"))
            want_bool_err = true; /* shifts take integers only (their own check) */
        const bool ok = int_err == want_int_err && bool_err == want_bool_err &&
                        (int_err || ts_dtype_of(yi) == want_i) &&
                        (bool_err || ts_dtype_of(yb) == want_b);
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "%s (%s): int32 -> %s, bool -> %s", r->name, d,
                          int_err ? "error" : ts_dtype_name(ts_dtype_of(yi)),
                          bool_err ? "error" : ts_dtype_name(ts_dtype_of(yb)));
        ts_scope_end();
    }
}

/* a SPECIAL row names a derivative only where one is recorded; the others by the grad_fn column */
static void test_front_and_grad_fn(void) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const row *r = &rows[i];
        if (strcmp(r->front, "OWN") == 0) {
            CHECK(r->fn == NULL);
            continue;
        }
        CHECK(r->fn != NULL);
        if (!r->fn) continue;
        ts_scope_begin();
        /* in (0.1, 0.9): inside every function's domain (acosh aside: its name still records) */
        ts_tensor *x =
            ts_mul_scalar(ts_add_scalar(ts_rand(TS_SHAPE(5), (ts_opts){0}), 0.125), 0.75);
        ts_set_requires_grad(x, true);
        ts_tensor *y = r->fn(x);
        if (!r->grad_fn && strcmp(r->front, "SPECIAL") == 0) {
            /* no derivative: the op refuses an input that requires grad */
            CHECK(y == NULL && ts_error() == TS_ERR_UNSUPPORTED);
        } else if (!y) {
            ts_test_failf(__FILE__, __LINE__, "%s failed%s", r->name, ts_test_error_str());
            ts_test_record(false);
        } else if (r->grad_fn) {
            const char *got = ts_grad_fn_name(y);
            const bool ok = got && strcmp(got, r->grad_fn) == 0;
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s: grad_fn %s, the row says %s", r->name,
                              got ? got : "(none)", r->grad_fn);
        } else {
            CHECK(ts_grad_fn_name(y) == NULL); /* logical_not: a bool result */
        }
        ts_error_clear();
        ts_scope_end();
    }
}

/* the dtype column on an int32 and a bool input (PyTorch's results) */
static void test_dtype_rules(void) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const row *r = &rows[i];
        if (!r->fn || strcmp(r->front, "SPECIAL") == 0) continue; /* special.c promotes */
        const char *d = r->dtype;
        ts_scope_begin();
        const int32_t iv[3] = {1, 2, 3};
        const bool bv[3] = {true, false, true};
        ts_tensor *xi = ts_from_data(TS_SHAPE(3), TS_I32, iv, (ts_opts){0});
        ts_tensor *xb = ts_from_data(TS_SHAPE(3), TS_BOOL, bv, (ts_opts){0});
        ts_tensor *yi = r->fn(xi);
        const bool int_err = yi == NULL;
        ts_error_clear();
        ts_tensor *yb = r->fn(xb);
        const bool bool_err = yb == NULL;
        ts_error_clear();
        ts_dtype want_i = TS_I32, want_b = TS_BOOL;
        bool want_int_err = false, want_bool_err = false;
        if (!strcmp(d, "TO_FLOAT")) {
            want_i = want_b = TS_F32;
        } else if (!strcmp(d, "FLOAT_ONLY")) {
            want_int_err = want_bool_err = true;
        } else if (!strcmp(d, "NO_BOOL") || !strcmp(d, "NEG") || !strcmp(d, "ROUNDING")) {
            want_bool_err = true;
        } else if (!strcmp(d, "SQUARE")) {
            want_b = TS_I64;
        } else if (!strcmp(d, "BOOL")) {
            want_i = TS_BOOL;
        } /* ANY, SIGN, NONFINITE: the input's dtype */
        const bool ok = int_err == want_int_err && bool_err == want_bool_err &&
                        (int_err || ts_dtype_of(yi) == want_i) &&
                        (bool_err || ts_dtype_of(yb) == want_b);
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "%s (%s): int32 -> %s, bool -> %s", r->name, d,
                          int_err ? "error" : ts_dtype_name(ts_dtype_of(yi)),
                          bool_err ? "error" : ts_dtype_name(ts_dtype_of(yb)));
        ts_scope_end();
    }
}

/* autocast takes each row's column by its name; no name is listed twice */
static void test_autocast(void) {
    CHECK_EQ(tsi_autocast_policy_duplicates(), 0);
    for (size_t i = 0; i < N_ROWS; i++) {
        const int got = (int)tsi_autocast_policy(rows[i].name);
        ts_test_record(got == rows[i].autocast);
        if (got != rows[i].autocast)
            ts_test_failf(__FILE__, __LINE__, "autocast: %s is %d, its row says %d", rows[i].name,
                          got, rows[i].autocast);
    }
    for (size_t i = 0; i < N_BROWS; i++) {
        const int got = (int)tsi_autocast_policy(brows[i].name);
        ts_test_record(got == brows[i].autocast);
        if (got != brows[i].autocast)
            ts_test_failf(__FILE__, __LINE__, "autocast: %s is %d, its row says %d", brows[i].name,
                          got, brows[i].autocast);
    }
    for (size_t i = 0; i < N_RROWS; i++)
        for (int form = 0; form < 2; form++) {
            const char *name = form ? rrows[i].name_dim : rrows[i].name;
            const int got = (int)tsi_autocast_policy(name);
            ts_test_record(got == rrows[i].autocast);
            if (got != rrows[i].autocast)
                ts_test_failf(__FILE__, __LINE__, "autocast: %s is %d, its row says %d", name, got,
                              rrows[i].autocast);
        }
    CHECK_EQ(tsi_autocast_policy("exp"), TSI_AC_FP32); /* the merge took the rows at all */
    CHECK_EQ(tsi_autocast_policy("sum"), TSI_AC_FP32);
    CHECK_EQ(tsi_autocast_policy("pow"), TSI_AC_FP32);
    CHECK_EQ(tsi_autocast_policy("exp_"), TSI_AC_NONE);
}

#ifdef TS_HAVE_ONNX
/* the exporter: a string is the operator written; OWN has an emitter in the table, NO none */
static void check_export(const char *name, const char *onnx) {
    const tse_op *u = tse_family_op(name), *own = NULL;
    for (const tse_op *o = tse_ops_elementwise; o->op; o++)
        if (!strcmp(o->op, name)) own = o;
    for (const tse_op *o = tse_ops_nn; o->op; o++)
        if (!strcmp(o->op, name)) own = o;
    bool ok;
    if (!strcmp(onnx, "OWN"))
        ok = own && !u;
    else if (!strcmp(onnx, "NO"))
        ok = !own && !u;
    else
        ok = !own && u && u->onnx && !strcmp(u->onnx, onnx);
    ts_test_record(ok);
    if (!ok) ts_test_failf(__FILE__, __LINE__, "export of %s: the row says %s", name, onnx);
}
static void test_onnx(void) {
    for (size_t i = 0; i < N_ROWS; i++) check_export(rows[i].name, rows[i].onnx);
    for (size_t i = 0; i < N_BROWS; i++) check_export(brows[i].name, brows[i].onnx);
    for (size_t i = 0; i < N_RROWS; i++) {
        check_export(rrows[i].name, rrows[i].onnx);
        check_export(rrows[i].name_dim, rrows[i].onnx);
    }
}
#else
static void test_onnx(void) {} /* built without ONNX */
#endif

int main(void) {
    test_order();
    test_front_and_grad_fn();
    test_dtype_rules();
    test_binary_rows();
    test_reduce_rows();
    test_autocast();
    test_onnx();
    return ts_test_finish();
}
