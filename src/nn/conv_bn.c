/* conv_bn.c — the eval path of Conv2d + BatchNorm2d (+ ReLU): when no gradient is recorded, one
 * convolution with the batch-norm folded into its weight and bias (nn/bn_fold.h, the ONNX
 * rewrite's arithmetic) and the ReLU applied as the output is written (tsi_conv2d_act, the ONNX
 * fused node's kernel call). The folded tensors are computed once and kept in the Conv2d until
 * one of the six tensors they come from changes (an optimizer step, ts_module_load_state_dict,
 * any in-place op, ts_module_to) or is replaced; the module's parameters and buffers are never
 * written. Under a bf16 autocast region (inference with `autocast`) the fold is rounded once from
 * float64 to bf16 and kept beside the float32 one, so the convolution runs bf16 as autocast's
 * would, with no cast of its weight at each call and no batch-norm pass. Anything else (training,
 * gradients recorded, a trace, a module that is not the built-in one, an f16 region) runs the
 * modules one after the other as before. ts_set_eval_fusion(false) turns the fold off. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "core/capture.h"
#include "nn/bn_fold.h"
#include "nn/conv_fused.h"
#include "nn/conv_internal.h"
#include "nn/layers_internal.h"
#include "nn/module_internal.h"

static atomic_bool fusion_off;

bool ts_set_eval_fusion(bool on) { return !atomic_exchange(&fusion_off, !on); }

/* ------------------------------------------------------------------ the cache */
/* What names a source tensor's contents: the handle (a re-registered parameter is a new one), its
 * storage's uid (never reused; ts_module_to and ts_module_to_dtype give new storage) and version
 * (bumped by every in-place op: optimizer steps, load_state_dict's copies, ts_init_*), its
 * offset, dtype and element count. NULL: an absent tensor. */
typedef struct src_key {
    const ts_tensor *t;
    uint64_t uid, version;
    int64_t offset, numel;
    ts_dtype dtype;
} src_key;

enum { N_SRC = 6 }; /* conv weight and bias, bn weight, bias, running mean and variance */

/* The folds kept: W' and b' in the weight's dtype, and rounded to autocast's bf16 */
enum { FOLD_OWN, FOLD_LOW, N_FOLDS };

struct tsi_conv_bn_cache {
    src_key key[N_SRC];
    double eps;
    const ts_module *bn;
    bool not_finite; /* the fold's s or b' is not finite: run unfused until a source changes */
    ts_tensor *w[N_FOLDS], *b[N_FOLDS]; /* W' and b' of each kind (NULL: not made yet) */
};

/* One lock for every Conv2d's cache: held to compare keys and take references, and while a fold
 * is computed (once per change), so threads sharing a model in inference fill it once. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void drop_folds(struct tsi_conv_bn_cache *c) {
    for (int i = 0; i < N_FOLDS; i++) {
        ts_release(c->w[i]), ts_release(c->b[i]);
        c->w[i] = c->b[i] = NULL;
    }
}

void tsi_conv_bn_cache_free(struct tsi_conv_bn_cache *c) {
    if (!c) return;
    drop_folds(c);
    free(c);
}

/* t's key; false when its memory can change without a version bump (memory Tessera does not own,
 * or handed to another framework: conv.c's weight identity refuses the same) */
static bool key_of(const ts_tensor *t, src_key *k) {
    *k = (src_key){0};
    if (!t) return true;
    const ts_storage *s = t->storage;
    if (!s->alloc || s->release || atomic_load(&s->exported)) return false;
    *k = (src_key){.t = t,
                   .uid = s->uid,
                   .version = (uint64_t)atomic_load(&s->version),
                   .offset = t->offset,
                   .numel = ts_numel((ts_tensor *)t),
                   .dtype = t->dtype};
    return true;
}

static bool same_key(const src_key *a, const src_key *b) {
    return a->t == b->t && a->uid == b->uid && a->version == b->version && a->offset == b->offset &&
           a->numel == b->numel && a->dtype == b->dtype;
}

/* ------------------------------------------------------------------ when it applies */
typedef struct plan {
    tsi_conv2d_parts conv;
    tsi_batch_norm2d_parts bn;
    ts_module *bn_module; /* NULL: conv + ReLU alone */
    bool relu;
    int fold; /* FOLD_LOW under a bf16 autocast region, else FOLD_OWN */
} plan;

static bool same_as(const ts_tensor *t, ts_dtype dt, const ts_tensor *x) {
    return !t || (t->dtype == dt && tsi_device_eq(tsi_device(t), tsi_device(x)));
}

/* Every condition under which the fused call gives what the modules give one after the other
 * (within the dtype's rounding for the fold, exactly for conv + ReLU): otherwise the caller runs
 * them, which also reports any error with the modules' own messages. Under autocast the fold
 * needs bf16 (the conv's lower precision there), float32 parameters and statistics (what
 * autocast casts) and a float32 or bf16 input. */
static bool plan_of(ts_module *conv, ts_module *bn, ts_module *act, ts_tensor *x, plan *p) {
    *p = (plan){.bn_module = bn, .relu = act != NULL};
    if (atomic_load_explicit(&fusion_off, memory_order_relaxed) || !x) return false;
    if (!tsi_conv2d_parts_of(conv, &p->conv) || (act && !tsi_module_is_relu(act))) return false;
    if (!bn && !act) return false; /* nothing to fuse */
    /* hooks (ts_module_place's among them) run only on the unfused path */
    if (conv->impl->hooks || (bn && bn->impl->hooks) || (act && act->impl->hooks)) return false;
    if (bn && (!tsi_batch_norm2d_parts_of(bn, &p->bn) || bn->training || !p->bn.mean ||
               !p->bn.var || x->shape.ndim != 4))
        return false;
    if (tsi_trace_active) return false;
    ts_tensor *const ins[5] = {x, p->conv.w, p->conv.b, p->bn.w, p->bn.b};
    if (tsi_needs_graph(ins, 5)) return false;
    if (!bn) return true; /* tsi_conv2d_act checks the operands and applies autocast itself */
    ts_dtype lower, pdt = x->dtype;
    if (tsi_autocast_any && tsi_autocast_active(tsi_device(x), &lower)) {
        if (lower != TS_BF16 || (x->dtype != TS_F32 && x->dtype != TS_BF16)) return false;
        pdt = TS_F32;
        p->fold = FOLD_LOW;
    } else if (x->dtype != TS_F32 && x->dtype != TS_F64) {
        return false;
    }
    if (tsi_capturing_on(tsi_device(x))) return false; /* the fold copies through the host */
    ts_tensor *const all[6] = {p->conv.w, p->conv.b, p->bn.w, p->bn.b, p->bn.mean, p->bn.var};
    for (int i = 0; i < 6; i++)
        if (!same_as(all[i], pdt, x)) return false;
    const ts_tensor *w = p->conv.w;
    return w && w->shape.ndim == 4 && p->bn.mean->shape.ndim == 1 &&
           p->bn.mean->shape.dims[0] == w->shape.dims[0];
}

/* ------------------------------------------------------------------ the folded tensors */
typedef enum fold_state { FOLD_OK, FOLD_UNFUSED, FOLD_ERROR } fold_state;

static fold_state state_of(tsi_bn_fold_result r) {
    return r == TSI_BN_FOLD_DONE         ? FOLD_OK
           : r == TSI_BN_FOLD_NOT_FINITE ? FOLD_UNFUSED
                                         : FOLD_ERROR;
}

/* W' and b' of p's kind: references the caller releases, from the cache when its key still
 * holds. */
static fold_state folded(ts_module *conv, const plan *p, ts_tensor **w, ts_tensor **b) {
    *w = *b = NULL;
    const tsi_bn_fold_src src = {.w = p->conv.w,
                                 .b = p->conv.b,
                                 .scale = p->bn.w,
                                 .shift = p->bn.b,
                                 .mean = p->bn.mean,
                                 .var = p->bn.var,
                                 .eps = p->bn.eps,
                                 .dtype = p->fold == FOLD_LOW ? TS_BF16 : TS_DTYPE_DEFAULT};
    ts_tensor *const all[N_SRC] = {src.w, src.b, src.scale, src.shift, src.mean, src.var};
    src_key key[N_SRC];
    /* a replica (data parallel) shares the original's struct words: it folds at each call */
    bool keyed = !conv->impl->replica;
    for (int i = 0; keyed && i < N_SRC; i++) keyed = key_of(all[i], &key[i]);
    if (!keyed) return state_of(tsi_bn_fold(&src, w, b));
    pthread_mutex_lock(&lock);
    struct tsi_conv_bn_cache *c = *p->conv.cache;
    bool hit = c && c->bn == p->bn_module && c->eps == src.eps;
    for (int i = 0; hit && i < N_SRC; i++) hit = same_key(&c->key[i], &key[i]);
    if (!hit) {
        if (!c && !(c = *p->conv.cache = calloc(1, sizeof *c))) {
            pthread_mutex_unlock(&lock);
            tsi_error_set(TS_ERR_OOM, "Conv2d: out of host memory (batch-norm fold)");
            return FOLD_ERROR;
        }
        drop_folds(c);
        c->bn = NULL; /* no entry until a fold succeeds */
    }
    fold_state st = FOLD_OK;
    if (!c->bn || (!c->not_finite && !c->w[p->fold])) {
        tsi_bn_fold_result r = tsi_bn_fold(&src, &c->w[p->fold], &c->b[p->fold]);
        if (r != TSI_BN_FOLD_FAILED) {
            memcpy(c->key, key, sizeof key);
            c->eps = src.eps;
            c->bn = p->bn_module;
            c->not_finite = r == TSI_BN_FOLD_NOT_FINITE;
        } else {
            st = FOLD_ERROR;
        }
    }
    if (st == FOLD_OK && c->not_finite) st = FOLD_UNFUSED;
    if (st == FOLD_OK) *w = ts_retain(c->w[p->fold]), *b = ts_retain(c->b[p->fold]);
    pthread_mutex_unlock(&lock);
    return st;
}

/* ------------------------------------------------------------------ the entry points */
static ts_tensor *unfused(ts_module *conv, ts_module *bn, ts_module *act, ts_tensor *x) {
    ts_tensor *y = ts_forward(conv, x);
    if (bn) y = ts_forward(bn, y);
    return act ? ts_forward(act, y) : y;
}

ts_tensor *ts_forward_conv_bn(ts_module *conv, ts_module *bn, ts_module *act, ts_tensor *x) {
    plan p;
    if (!plan_of(conv, bn, act, x, &p)) return unfused(conv, bn, act, x);
    const tsi_conv_act a = p.relu ? TSI_CONV_ACT_RELU : TSI_CONV_ACT_NONE;
    if (!bn) return tsi_conv2d_act(x, p.conv.w, p.conv.b, p.conv.o, a, NAN, NAN);
    ts_tensor *w, *b;
    switch (folded(conv, &p, &w, &b)) {
    case FOLD_ERROR:
        return NULL;
    case FOLD_UNFUSED:
        return unfused(conv, bn, act, x);
    case FOLD_OK:
        break;
    }
    ts_tensor *y = tsi_conv2d_act(x, w, b, p.conv.o, a, NAN, NAN);
    ts_release(w), ts_release(b);
    return y;
}

int tsi_conv_bn_span(ts_module *const *ms, int n, ts_module **bn, ts_module **act) {
    *bn = *act = NULL;
    tsi_conv2d_parts cp;
    if (n < 2 || !tsi_conv2d_parts_of(ms[0], &cp)) return 1;
    tsi_batch_norm2d_parts bp;
    int k = 1;
    if (tsi_batch_norm2d_parts_of(ms[k], &bp)) *bn = ms[k++];
    if (k < n && tsi_module_is_relu(ms[k])) *act = ms[k++];
    return k;
}
