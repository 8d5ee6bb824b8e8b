/* embedding_bag.c — torch.nn.functional.embedding_bag (issue 52; mode max: issue 76, bag_max). Sum
 * and mean (issue 52): each bag's
 * rows of weight reduced in one backend call (the embedding_bag slot: no [bags, width, D] gather
 * and no second pass; src/backend/cpu/kern_embedding_bag.c). The front end reads the indices and
 * offsets on the host to check them (PyTorch's checks), as embedding does; a captured step reads
 * nothing there, so it takes only the 2-D form without a graph. float16 / bfloat16 weights run in
 * float32 and are cast back.
 *
 * The gradient (EmbeddingBagBackward0) is composed of differentiable ops: each position's output
 * gradient row (index_select by its bag) times its coefficient — 0 for padding and for positions in
 * no bag, 1 / the bag's kept count for mean, the per-sample weight for sum with weights — added
 * into the weight's rows with index_add; the per-sample weights' gradient is each row's dot with
 * its weight row. The bag of each position and the coefficients are built on the host at forward
 * time, from the indices and offsets read there anyway. */
#include <math.h>
#include <stdlib.h>

#include "autograd/trace.h"
#include "core/capture.h"
#include "nn/functional_internal.h"

/* what the backward needs, saved in the node: the weight (with per-sample weights), flat indices,
 * bag of each position, its coefficient (weight's dtype), the flat per-sample weights (NULL: none)
 */
enum { SV_W, SV_IDX, SV_BAG, SV_COEF, SV_PSW, SV_N };

static void embedding_bag_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, SV_IDX), *bag = tsi_node_saved(n, SV_BAG);
    ts_tensor *coef = tsi_node_saved(n, SV_COEF);
    ts_tensor *psw = tsi_node_has_saved(n, SV_PSW) ? tsi_node_saved(n, SV_PSW) : NULL;
    ts_tensor *w = psw ? tsi_node_saved(n, SV_W) : NULL; /* saved only for psw's gradient */
    if (!go[0] || !idx || !bag || !coef || (tsi_node_has_saved(n, SV_PSW) && (!psw || !w))) return;
    const ts_opts wo = {.dtype = n->in_dtype[0], .device = n->in_device[0]};
    if (ts_size(go[0], 0) == 0 || ts_numel(idx) == 0) { /* no bags or no positions */
        if (tsi_node_needs(n, 0)) gi[0] = ts_zeros(n->in_shape[0], wo);
        if (tsi_node_needs(n, 1)) gi[1] = ts_zeros(n->in_shape[1], wo);
        return;
    }
    ts_tensor *rows = ts_index_select(go[0], 0, bag); /* [positions, D] */
    if (tsi_node_needs(n, 0)) {
        ts_tensor *c = psw ? ts_mul(coef, psw) : coef;
        ts_tensor *src = ts_mul(rows, ts_unsqueeze(c, 1));
        gi[0] = ts_index_add(ts_zeros(n->in_shape[0], wo), 0, idx, src, 1.0);
    }
    if (tsi_node_needs(n, 1) && psw) {
        ts_tensor *dots = ts_sum_dim(ts_mul(rows, ts_index_select(w, 0, idx)), -1, false);
        gi[1] = ts_reshape(ts_mul(dots, coef), n->in_shape[1]);
    }
}

/* the host copy of an integer tensor as int64 (n values); NULL with the error recorded */
static int64_t *host_i64(const char *op, ts_tensor *t, int64_t n) {
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    if (n == 0) return v;
    ts_tensor *c = tsi_cast(op, t, TS_I64);
    bool ok = c && ts_copy_to_host(c, v, (size_t)n * sizeof *v) == TS_OK;
    ts_release(c);
    if (!ok) free(v), v = NULL;
    return v;
}

typedef struct bag_plan {
    int64_t n, bags, width; /* positions; bags; the 2-D form's bag length (0 with offsets) */
    int64_t *off;           /* host: bags + 1 bounds (offsets form), NULL for the 2-D form */
    int64_t *iv;            /* host indices (NULL under capture) */
} bag_plan;

static bool check_offsets(const char *op, ts_tensor *offsets, bool last, bag_plan *pl) {
    const int64_t m = tsi_numel(offsets->shape);
    int64_t *o = host_i64(op, offsets, m);
    if (!o) return false;
    pl->bags = last ? (m > 0 ? m - 1 : 0) : m;
    pl->off = malloc((size_t)(pl->bags + 1) * sizeof *pl->off);
    if (!pl->off) return free(o), tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    bool ok = true;
    if (m > 0 && o[0] != 0) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                      "to start from position 0. However, got %lld",
                      op, (long long)o[0]);
        ok = false;
    }
    for (int64_t i = 0; ok && i < m; i++)
        if (o[i] < 0 || o[i] > pl->n || (i > 0 && o[i] < o[i - 1])) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: offsets must be non-decreasing and in [0, %lld], got %lld at "
                          "offsets[%lld]",
                          op, (long long)pl->n, (long long)o[i], (long long)i);
            ok = false;
        }
    for (int64_t b = 0; ok && b < pl->bags; b++) pl->off[b] = o[b];
    if (ok) pl->off[pl->bags] = last ? (m > 0 ? o[m - 1] : 0) : pl->n;
    free(o);
    return ok;
}

/* the gradient's per-position bag and coefficient, from the host plan */
static bool backward_tables(const char *op, const bag_plan *pl, int mode, int64_t pad, ts_tensor *w,
                            ts_tensor **bag_t, ts_tensor **coef_t) {
    const int64_t n = pl->n;
    int64_t *bag = calloc((size_t)(n ? n : 1), sizeof *bag);
    double *coef = calloc((size_t)(n ? n : 1), sizeof *coef);
    if (!bag || !coef) {
        free(bag), free(coef);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    }
    for (int64_t b = 0; b < pl->bags; b++) {
        const int64_t s = pl->off ? pl->off[b] : b * pl->width;
        const int64_t e = pl->off ? pl->off[b + 1] : s + pl->width;
        int64_t kept = 0;
        for (int64_t p = s; p < e; p++) kept += pl->iv[p] != pad;
        for (int64_t p = s; p < e; p++) {
            bag[p] = b;
            coef[p] = pl->iv[p] == pad ? 0.0 : mode == 1 ? 1.0 / (double)kept : 1.0;
        }
    }
    const ts_opts o = {.dtype = TS_I64, .device = tsi_device(w)};
    const ts_opts od = {.dtype = TS_F64, .device = tsi_device(w)};
    *bag_t = ts_from_data(TS_SHAPE(n), TS_I64, bag, o);
    *coef_t = ts_to_dtype(ts_from_data(TS_SHAPE(n), TS_F64, coef, od), w->dtype);
    free(bag), free(coef);
    return *bag_t && *coef_t;
}

/* the op on float32 / float64 operands, all checked; idx flat [n] */
static ts_tensor *bag_kernel(const char *op, ts_tensor *w, ts_tensor *idx, ts_tensor *psw,
                             const bag_plan *pl, int mode, int64_t pad) {
    const int64_t D = w->shape.dims[1];
    ts_tensor *y = tsi_own(tsi_new(op, TS_SHAPE(pl->bags, D), w->dtype, tsi_device(w)));
    if (!y || pl->bags == 0 || D == 0) return y;
    ts_tensor *offs = NULL;
    if (pl->off) {
        offs = ts_from_data(TS_SHAPE(pl->bags + 1), TS_I64, pl->off,
                            (ts_opts){.dtype = TS_I64, .device = tsi_device(w)});
        if (!offs) return NULL;
    }
    ts_bag_args a = {.weight = tsi_kview(w),
                     .idx = tsi_kview(idx),
                     .mode = mode,
                     .padding_idx = pad,
                     .width = pl->width,
                     .bags = pl->bags};
    if (offs) a.offsets = tsi_kview(offs);
    if (psw) a.psw = tsi_kview(psw);
    const ts_kview ko = tsi_kview(y);
    const ts_backend *be = tsi_be(y);
    if (!be->embedding_bag)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: this device's backend has no kernel", op),
               NULL;
    be->embedding_bag(be, tsi_dev_index(y), &ko, &a);
    return y;
}

/* mode max, composed of differentiable ops from the host plan: each bag's rows gathered into
 * [bags, width, D] (width: the longest bag), absent and padding entries -inf, the max over the bag
 * (its gradient to the first maximal row, as PyTorch's max_indices), an empty bag zeros */
static ts_tensor *bag_max(const char *op, ts_tensor *w, ts_tensor *idx, const bag_plan *pl,
                          int64_t pad) {
    const int64_t nb = pl->bags, D = w->shape.dims[1];
    int64_t width = pl->width;
    for (int64_t b = 0; pl->off && b < nb; b++)
        width = pl->off[b + 1] - pl->off[b] > width ? pl->off[b + 1] - pl->off[b] : width;
    const ts_opts wo = {.dtype = w->dtype, .device = tsi_device(w)};
    if (nb == 0 || width == 0 || D == 0) return ts_zeros(TS_SHAPE(nb, D), wo);
    int64_t *pos = malloc((size_t)(nb * width) * sizeof *pos);
    bool *drop = malloc((size_t)(nb * width) * sizeof *drop), *empty = malloc((size_t)nb);
    if (!pos || !drop || !empty) {
        free(pos), free(drop), free(empty);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    for (int64_t b = 0; b < nb; b++) {
        const int64_t s = pl->off ? pl->off[b] : b * pl->width;
        const int64_t e = pl->off ? pl->off[b + 1] : s + pl->width;
        empty[b] = true;
        for (int64_t k = 0; k < width; k++) {
            const bool in = s + k < e;
            pos[b * width + k] = in ? s + k : 0;
            drop[b * width + k] = !in || pl->iv[s + k] == pad;
            empty[b] &= drop[b * width + k];
        }
    }
    const ts_device dev = tsi_device(w);
    ts_tensor *pos_t =
        ts_from_data(TS_SHAPE(nb * width), TS_I64, pos, (ts_opts){.dtype = TS_I64, .device = dev});
    ts_tensor *drop_t = ts_from_data(TS_SHAPE(nb, width, 1), TS_BOOL, drop,
                                     (ts_opts){.dtype = TS_BOOL, .device = dev});
    ts_tensor *empty_t =
        ts_from_data(TS_SHAPE(nb, 1), TS_BOOL, empty, (ts_opts){.dtype = TS_BOOL, .device = dev});
    free(pos), free(drop), free(empty);
    ts_tensor *rows = ts_index_select(ts_to_dtype(idx, TS_I64), 0, pos_t);
    ts_tensor *emb = ts_reshape(ts_index_select(w, 0, rows), TS_SHAPE(nb, width, D));
    ts_tensor *at = NULL;
    ts_tensor *vals = ts_max_dim(ts_masked_fill(emb, drop_t, -INFINITY), 1, false, &at);
    return ts_masked_fill(vals, empty_t, 0.0);
}

static ts_tensor *finish(ts_tensor *y, bag_plan *pl) {
    free(pl->off), free(pl->iv);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

static bool check_args(const char *op, ts_tensor *w, ts_tensor *ind, ts_tensor *off, int mode,
                       ts_tensor *psw, int64_t pad) {
    if (w->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: weight has to be a 2D Tensor, but got %s", op,
                             tsi_desc(w)),
               false;
    if (!tsi_is_float(w->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating weight, got %s", op,
                             tsi_desc(w)),
               false;
    if (ind->dtype != TS_I64 && ind->dtype != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected indices of dtype int64 or int32, got %s",
                             op, tsi_desc(ind)),
               false;
    if (mode != 0 && mode != 1 && mode != 2)
        return tsi_error_set(TS_ERR_ARG, "%s: mode has to be 0 (sum), 1 (mean) or 2 (max), got %d",
                             op, mode),
               false;
    if (ind->shape.ndim == 2 && off)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: if input is 2D, then offsets has to be NULL, as input is treated "
                             "as a mini-batch of fixed length sequences",
                             op),
               false;
    if (ind->shape.ndim != 1 && ind->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input has to be 1D or 2D Tensor, but got %s", op,
                             tsi_desc(ind)),
               false;
    if (ind->shape.ndim == 1 && (!off || off->shape.ndim != 1))
        return tsi_error_set(TS_ERR_ARG, "%s: offsets has to be a 1D Tensor for a 1D input", op),
               false;
    if (off && off->dtype != TS_I64 && off->dtype != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected offsets of dtype int64 or int32, got %s",
                             op, tsi_desc(off)),
               false;
    if (psw && mode != 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: per_sample_weights was not NULL. per_sample_weights is only "
                             "supported for mode sum",
                             op),
               false;
    if (psw && !tsi_shape_equal(psw->shape, ind->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: per_sample_weights %s and input %s must have the same shape", op,
                             tsi_desc(psw), tsi_desc(ind)),
               false;
    if (psw && psw->dtype != w->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected per_sample_weights of weight's dtype %s, got %s", op,
                             ts_dtype_name(w->dtype), tsi_desc(psw)),
               false;
    if (pad < -1 || pad >= w->shape.dims[0])
        return tsi_error_set(TS_ERR_ARG,
                             "%s: padding_idx must be within the number of embeddings [0, %lld) "
                             "or -1 (none), got %lld",
                             op, (long long)w->shape.dims[0], (long long)pad),
               false;
    return true;
}

ts_tensor *ts_embedding_bag(ts_tensor *weight, ts_tensor *indices, ts_tensor *offsets, int mode,
                            ts_tensor *per_sample_weights, int64_t padding_idx,
                            bool include_last_offset) {
    const char *op = "embedding_bag";
    tsi_init();
    ts_tensor *psw = per_sample_weights;
    if (!tsi_check_input(op, weight, "weight") || !tsi_check_input(op, indices, "input") ||
        (offsets && !tsi_check_input(op, offsets, "offsets")) ||
        (psw && !tsi_check_input(op, psw, "per_sample_weights")))
        return NULL;
    ts_tensor *all[4] = {weight, indices, offsets, psw};
    ts_tensor *some[4];
    int k = 0;
    for (int i = 0; i < 4; i++)
        if (all[i]) some[k++] = all[i];
    ts_device dev;
    if (!tsi_same_device(op, some, k, false, &dev)) return NULL;
    if (!check_args(op, weight, indices, offsets, mode, psw, padding_idx)) return NULL;
    const int64_t N = weight->shape.dims[0];
    bag_plan pl = {.n = tsi_numel(indices->shape)};
    const bool capturing = tsi_capturing_on(dev);
    ts_tensor *ins[2] = {weight, psw};
    const bool graph = tsi_needs_graph(ins, 2);
    if (capturing && (offsets || graph))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: a captured step takes only the 2-D input without a graph (the "
                             "offsets and the gradient's tables are read on the host)",
                             op),
               NULL;
    ts_scope_begin();
    if (offsets) {
        if (!check_offsets(op, offsets, include_last_offset, &pl)) return finish(NULL, &pl);
    } else {
        pl.bags = indices->shape.dims[0], pl.width = indices->shape.dims[1];
    }
    if (!capturing) {
        pl.iv = host_i64(op, indices, pl.n);
        if (!pl.iv) return finish(NULL, &pl);
        for (int64_t i = 0; i < pl.n; i++)
            if (pl.iv[i] < 0 || pl.iv[i] >= N) {
                tsi_error_set(TS_ERR_ARG,
                              "%s: index %lld is out of range for weight %s (index out of range "
                              "in self)",
                              op, (long long)pl.iv[i], tsi_shape_str(weight->shape));
                return finish(NULL, &pl);
            }
    }
    /* float16 / bfloat16: in float32, cast back (differentiable casts) */
    const ts_dtype wt = weight->dtype;
    const bool half = wt != TS_F32 && wt != TS_F64;
    ts_tensor *w = half ? ts_to_dtype(weight, TS_F32) : weight;
    ts_tensor *p = psw && half ? ts_to_dtype(psw, TS_F32) : psw;
    ts_tensor *idx = ts_contiguous(ts_reshape(indices, TS_SHAPE(pl.n)));
    if (p) p = ts_contiguous(ts_reshape(p, TS_SHAPE(pl.n)));
    if (!w || !idx || (psw && !p)) return finish(NULL, &pl);
    if (mode == 2 && capturing)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: mode max reads the indices on the host: not in a captured step",
                             op),
               finish(NULL, &pl);
    ts_tensor *y = mode == 2 ? bag_max(op, w, idx, &pl, padding_idx)
                             : bag_kernel(op, w, idx, p, &pl, mode, padding_idx);
    if (y && ts_error() == TS_OK && graph && mode != 2) {
        ts_tensor *bag = NULL, *coef = NULL, *idx64 = ts_to_dtype(idx, TS_I64);
        if (!idx64 || !backward_tables(op, &pl, mode, padding_idx, w, &bag, &coef))
            return finish(NULL, &pl);
        ts_tensor *nin[2] = {w, p};
        ts_node *n = tsi_record("EmbeddingBagBackward0", op, embedding_bag_backward, nin, 2, y,
                                (ts_tensor *[]){p ? w : NULL, idx64, bag, coef, p}, SV_N);
        if (n) n->flags |= TSI_NODE_TWICE; /* public ops on g, the weight and psw */
    }
    if (half && y) y = ts_to_dtype(y, wt);
    y = tsi_trace(op, ins, 2, y, NULL, 0, NULL, 0);
    return finish(y, &pl);
}
