/* autocast_policy.c — which ops autocast casts, and to what: PyTorch's lists
 * (aten/src/ATen/autocast_mode.cpp: CUDA's on cuda and sim, the CPU's on the cpu, decision 0033)
 * for the ops Tessera has, and the casting of an op's arguments that the front ends call
 * (tsi_autocast_enter/exit). docs/AMP.md explains each choice. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"

typedef struct policy_entry {
    const char *op;       /* the front end's op name, as in its error messages */
    tsi_ac_policy policy; /* CUDA's lists: on cuda and sim (docs/decisions/0033) */
    tsi_ac_policy cpu;    /* the CPU's lists (AutocastCPU), as PyTorch 2.x gives them */
} policy_entry;

/* The CPU's layer_norm, rms_norm and group_norm (on no CPU list): PyTorch's CPU kernels take a half
 * input with float32 parameters, compute in float32 and return the input's dtype. Tessera's fused
 * kernels take only parameters of x's dtype (mixed ones compose), so autocast gives them that: the
 * eligible arguments widened to float32 (exact), the float32 result rounded once to a half
 * input's dtype. */
#define AC_IN_DTYPE ((tsi_ac_policy)(TSI_AC_KEEP + 1))
/* CUDA's banned list (binary_cross_entropy): under autocast the op fails with PyTorch's reason, its
 * arguments replaced by NULL (the op returns NULL, the error pending) */
#define AC_BANNED ((tsi_ac_policy)(TSI_AC_KEEP + 2))

#define NONE  TSI_AC_NONE
#define FP32  TSI_AC_FP32
#define LOWP  TSI_AC_LOWER_PRODUCT
#define PROMO TSI_AC_PROMOTE

/* Sorted by name. The op families' ops (exp, log, rsqrt, pow, sum...) are not here: their
 * columns are unary_ops.def's, binary_ops.def's and reduce_ops.def's, merged in below. Not listed
 * (NONE): everything else, e.g. mean, var, sqrt, relu, the pools, add/mul (which promote by type
 * promotion anyway) and every in-place op, as in PyTorch. The CPU's fp32 list holds the losses and
 * prod but none of CUDA's pointwise functions, reductions, softmaxes or norms: there those run in
 * the dtype they are given. */
static const policy_entry table[] = {
    /* fp32: CUDA's list is binary_cross_entropy_with_logits, l1/smooth_l1/mse/nll loss ... */
    {"addbmm", LOWP, LOWP},
    {"addmm", LOWP, LOWP},
    {"addmv", LOWP, TSI_AC_KEEP}, /* on CUDA's list only: the CPU's kernel, no cast */
    {"addr", LOWP, TSI_AC_KEEP},  /* as addmv */
    {"baddbmm", LOWP, LOWP},
    /* batch_norm is on neither CPU's nor CUDA's list: their kernels take a half input with float32
     * parameters and compute in float32 (Tessera's fused kernels and composition too), so a bf16
     * input stays bf16; KEEP only keeps autocast off for the ops it is made of */
    {"batch_norm", TSI_AC_KEEP, TSI_AC_KEEP},
    {"binary_cross_entropy", AC_BANNED, FP32},
    {"binary_cross_entropy_with_logits", FP32, FP32},
    {"bmm", LOWP, LOWP},
    /* promote: cat and stack are on PyTorch's CPU promote list (CUDA's cat promotes natively) */
    {"cat", PROMO, PROMO},
    {"cdist", FP32, FP32},
    {"conv2d", TSI_AC_LOWER, TSI_AC_LOWER},
    /* cross_entropy is log_softmax + nll_loss in PyTorch, both fp32; the CPU list names it */
    {"cosine_embedding_loss", FP32, FP32},
    {"cross_entropy", FP32, FP32},
    {"cumprod", FP32, NONE},     /* fp32_set_opt_dtype */
    {"cumsum", FP32, NONE},      /* fp32_set_opt_dtype */
    {"dot", PROMO, TSI_AC_KEEP}, /* CUDA's promote list; the CPU's kernel, no cast */
    {"group_norm", FP32, AC_IN_DTYPE},
    {"hinge_embedding_loss", FP32, FP32},
    {"huber_loss", FP32, FP32},
    {"kl_div", FP32, FP32},
    {"l1_loss", FP32, FP32},
    {"layer_norm", FP32, AC_IN_DTYPE},
    {"linalg.matrix_norm", FP32, NONE}, /* fp32_set_opt_dtype */
    {"linalg.vector_norm", FP32, NONE}, /* fp32_set_opt_dtype */
    {"linear", LOWP, LOWP},
    {"log_softmax", FP32, NONE}, /* fp32_set_opt_dtype */
    {"margin_ranking_loss", FP32, FP32},
    {"matmul", LOWP, LOWP},
    {"mm", LOWP, LOWP},
    {"mse_loss", FP32, FP32},
    {"multi_margin_loss", FP32, FP32},
    {"multilabel_margin_loss", FP32, FP32},
    {"mv", LOWP, TSI_AC_KEEP}, /* as addmv */
    {"nll_loss", FP32, FP32},
    {"poisson_nll_loss", FP32, FP32},
    {"pow_scalar", FP32, NONE}, /* pow.Tensor_Scalar */
    {"prelu", TSI_AC_LOWER, TSI_AC_LOWER},
    {"rms_norm", FP32, AC_IN_DTYPE},
    {"rpow_scalar", FP32, NONE}, /* pow.Scalar: a number to a tensor's powers */
    {"scaled_dot_product_attention", TSI_AC_LOWER, TSI_AC_LOWER},
    /* CUDA's promote list; not the CPU's, where mixed dtypes are the op's error */
    {"scatter_add", PROMO, NONE},
    {"smooth_l1_loss", FP32, FP32},
    {"soft_margin_loss", FP32, FP32},
    {"softmax", FP32, NONE}, /* fp32_set_opt_dtype */
    {"stack", PROMO, PROMO},
    {"tensordot", PROMO, NONE}, /* CUDA's promote list; the CPU composes mm */
    {"triplet_margin_loss", FP32, FP32},
    /* where promotes natively in PyTorch; listing it gives the same dtypes */
    {"where", PROMO, PROMO},
};
#define N_TABLE (sizeof table / sizeof table[0])

static int cmp_entry(const void *key, const void *e) {
    return strcmp((const char *)key, ((const policy_entry *)e)->op);
}
static int cmp_entries(const void *a, const void *b) {
    return strcmp(((const policy_entry *)a)->op, ((const policy_entry *)b)->op);
}

/* the op families' autocast columns (unary_ops.def, binary_ops.def, reduce_ops.def) */
static const policy_entry family_rows[] = {
#define X(ID, name, front, dtype, grad_fn, autocast, autocast_cpu, ...)                            \
    {#name, autocast, autocast_cpu},
#include "backend/unary_ops.def"
/* (a comment between the two keeps clang-format from sorting them) */
#include "backend/binary_ops.def"
#undef X
/* the reductions: both names (sum, and amax beside max) */
#define X(ID, name, name_dim, dtype, grad_fn, grad_fn_dim, autocast, autocast_cpu, ...)            \
    {#name, autocast, autocast_cpu}, {#name_dim, autocast, autocast_cpu},
#include "backend/reduce_ops.def"
#undef X
};
#define N_FAMILY (sizeof family_rows / sizeof family_rows[0])
#undef NONE
#undef FP32
#undef LOWP
#undef PROMO

/* table and the family rows that cast, sorted once for bsearch (a name in both would be a
 * mistake: tests/test_op_tables.c checks that none is) */
static policy_entry merged[N_TABLE + N_FAMILY];
static size_t n_merged;
static pthread_once_t merged_once = PTHREAD_ONCE_INIT;
static int row_conflicts; /* a name on two family rows with different columns */
static void merge(void) {
    memcpy(merged, table, sizeof table);
    n_merged = N_TABLE;
    const size_t first_row = n_merged;
    for (size_t i = 0; i < N_FAMILY; i++) {
        const policy_entry *r = &family_rows[i];
        if (r->policy == TSI_AC_NONE && r->cpu == TSI_AC_NONE) continue;
        bool seen = false; /* a reduction's two names can be one (sum) */
        for (size_t k = first_row; k < n_merged && !seen; k++)
            if (strcmp(merged[k].op, r->op) == 0) {
                seen = true;
                row_conflicts += merged[k].policy != r->policy || merged[k].cpu != r->cpu;
            }
        if (!seen) merged[n_merged++] = *r;
    }
    qsort(merged, n_merged, sizeof merged[0], cmp_entries);
}

static const policy_entry *find(const char *op) {
    pthread_once(&merged_once, merge);
    return bsearch(op, merged, n_merged, sizeof merged[0], cmp_entry);
}

int tsi_autocast_policy_duplicates(void) {
    pthread_once(&merged_once, merge);
    int n = row_conflicts;
    for (size_t i = 1; i < n_merged; i++) n += strcmp(merged[i - 1].op, merged[i].op) == 0;
    return n;
}

/* CUDA's column (autocast.h) */
tsi_ac_policy tsi_autocast_policy(const char *op) {
    const policy_entry *e = find(op);
    return e ? e->policy : TSI_AC_NONE;
}

/* The policy on a device type: the CPU's column on the cpu; CUDA's on cuda and on sim, which
 * stands in for a device in tests and so follows CUDA's lists. */
static tsi_ac_policy policy_on(const char *op, ts_device_type type) {
    const policy_entry *e = find(op);
    return !e ? TSI_AC_NONE : type == TS_CPU ? e->cpu : e->policy;
}

/* ------------------------------------------------------------------ argument casting */
/* The device type whose autocast state governs the op: that of the first tensor argument that is
 * not a 0-dim cpu tensor (those may join ops on other devices as numbers), else the first one. */
static bool op_device(ts_tensor *const *ts, int n, ts_device *dev) {
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (first < 0) first = i;
        ts_device d = tsi_device(ts[i]);
        if (d.type != TS_CPU || ts[i]->shape.ndim > 0) {
            *dev = d;
            return true;
        }
    }
    if (first < 0) return false;
    *dev = tsi_device(ts[first]);
    return true;
}

/* PyTorch's is_eligible: floating, not float64, on the op's device type. */
static bool eligible(const ts_tensor *t, ts_device_type type) {
    return t && tsi_is_float(t->dtype) && t->dtype != TS_F64 && tsi_device(t).type == type;
}

/* The dtype the policy casts eligible arguments to; TS_DTYPE_DEFAULT: cast nothing. */
static ts_dtype target_dtype(tsi_ac_policy p, ts_dtype lower, ts_tensor *const *ts, int n,
                             ts_device_type type) {
    switch (p) {
    case TSI_AC_LOWER:
    case TSI_AC_LOWER_PRODUCT:
        return lower;
    case TSI_AC_FP32:
        return TS_F32;
    case TSI_AC_PROMOTE: {
        /* PyTorch's promote_type: f32 wins over the lower dtype; float64 arguments are ignored.
         * PyTorch refuses f16 with bf16 ("Unexpected floating ScalarType"); we take f32 for
         * them, which is what type promotion gives. */
        ts_dtype r = TS_DTYPE_DEFAULT;
        for (int i = 0; i < n; i++) {
            if (!eligible(ts[i], type)) continue;
            if (r == TS_DTYPE_DEFAULT)
                r = ts[i]->dtype;
            else if (r != ts[i]->dtype)
                r = TS_F32;
        }
        return r;
    }
    default:
        return TS_DTYPE_DEFAULT;
    }
}

bool tsi_autocast_products_native(ts_device d, ts_dtype dt) {
    const ts_backend *be = tsi_backend_for(d.type);
    return !be || !be->half_products_native || be->half_products_native(be, d.index, dt);
}

/* Casts the eligible arguments in ts[0..n) in place, keeping the casts in the frame. */
static bool cast_args(tsi_ac_frame *f, const char *op, ts_tensor **ts, int n) {
    ts_device dev;
    ts_dtype lower;
    if (!op_device(ts, n, &dev)) return false;
    tsi_ac_policy p = policy_on(op, dev.type);
    if (p == TSI_AC_NONE || !tsi_autocast_active(dev, &lower)) return false;
    ts_dtype to = target_dtype(p, lower, ts, n, dev.type);
    f->round_to = TS_DTYPE_DEFAULT;
    f->op = op;
    if (p == TSI_AC_LOWER_PRODUCT && !tsi_autocast_products_native(dev, lower)) {
        to = TS_F32;
        f->round_to = lower;
    }
    if (p == AC_IN_DTYPE) {
        to = TS_F32;
        if (eligible(ts[0], dev.type) && ts[0]->dtype != TS_F32) f->round_to = ts[0]->dtype;
    }
    if (p == AC_BANNED) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s: unsafe to autocast (PyTorch's CUDA list, followed on cuda and sim, "
                      "bans it): many models apply a sigmoid right before it; combine the two "
                      "with binary_cross_entropy_with_logits, which is safe to autocast",
                      op);
        for (int i = 0; i < n; i++) ts[i] = NULL;
    }
    f->owned = n <= TSI_AC_FRAME_SMALL ? f->small : malloc((size_t)n * sizeof *f->owned);
    if (!f->owned) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %d autocast arguments", op, n);
        return false;
    }
    f->n_owned = 0;
    for (int i = 0; to != TS_DTYPE_DEFAULT && i < n; i++) {
        if (!eligible(ts[i], dev.type) || ts[i]->dtype == to) continue;
        /* a failed cast leaves NULL (error recorded): the op then returns NULL, as with any
         * NULL input while an error is pending */
        ts[i] = f->owned[f->n_owned++] = tsi_autocast_cast(op, ts[i], to);
    }
    /* the float32 result goes to this scope, ended once it is rounded (tsi_autocast_exit_slow) */
    if (f->round_to != TS_DTYPE_DEFAULT) ts_scope_begin();
    /* PyTorch's ExcludeDispatchKeyGuard: the ops this one is made of run as they are */
    f->saved_any = tsi_autocast_any;
    tsi_autocast_any = 0;
    f->active = true;
    return true;
}

void tsi_autocast_enter_slow(tsi_ac_frame *f, const char *op, ts_tensor **const *slots, int n) {
    ts_tensor *ts[TSI_AC_FRAME_SMALL];
    if (n > TSI_AC_FRAME_SMALL) return; /* front ends pass at most a few arguments */
    for (int i = 0; i < n; i++) ts[i] = *slots[i];
    f->list = NULL;
    if (!cast_args(f, op, ts, n)) return;
    for (int i = 0; i < n; i++) *slots[i] = ts[i];
}

void tsi_autocast_enter_list_slow(tsi_ac_frame *f, const char *op, ts_tensor *const **list, int n) {
    f->list = NULL;
    /* invalid lists are the op's to report */
    if (!*list || n <= 0 || !find(op)) return;
    ts_tensor **copy = malloc((size_t)n * sizeof *copy);
    if (!copy) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %d autocast arguments", op, n);
        return;
    }
    memcpy(copy, *list, (size_t)n * sizeof *copy);
    if (!cast_args(f, op, copy, n)) {
        free(copy);
        return;
    }
    f->list = copy;
    *list = copy;
}

ts_tensor *tsi_autocast_exit_slow(tsi_ac_frame *f, ts_tensor *result) {
    tsi_autocast_any = f->saved_any;
    if (f->round_to != TS_DTYPE_DEFAULT) {
        /* differentiable (ToCopyBackward0): the gradient comes back widened to float32 */
        ts_tensor *r = result && result->dtype == TS_F32
                           ? tsi_autocast_cast(f->op, result, f->round_to)
                           : ts_retain(result);
        ts_scope_end(); /* the float32 result, unless the graph keeps it */
        result = tsi_own(r);
    }
    for (int i = 0; i < f->n_owned; i++) ts_release(f->owned[i]);
    if (f->owned != f->small) free(f->owned);
    free(f->list);
    f->active = false;
    return result;
}
