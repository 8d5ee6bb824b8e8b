/* index.c — indexing front ends: index_select, gather, scatter_add(_), one_hot. */
#include <stdlib.h>
#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "core/capture.h"
#include "core/clones.h"
#include "core/profiler_hooks.h"
#include "ops/index_check.h"
#include "ops/shape_grad.h"

#define SMALL_INDEX 256 /* index lists up to this long are checked without a heap buffer */

/* A kernel view with at least one dim: PyTorch treats a 0-dim operand of these ops as size [1]. */
static ts_kview kview1(const ts_tensor *t) {
    ts_kview v = tsi_kview(t);
    if (v.ndim == 0) {
        v.ndim = 1;
        v.shape[0] = 1;
        v.strides[0] = 1;
    }
    return v;
}
static int ndim1(const ts_tensor *t) { return t->shape.ndim > 0 ? t->shape.ndim : 1; }
static int64_t size1(const ts_tensor *t, int d) { return t->shape.ndim > 0 ? t->shape.dims[d] : 1; }

/* The values of an integer index tensor on the host (cast to i64): `small` when they fit, else a
 * malloc'ed buffer the caller frees. */
static int64_t *index_to_host(const char *op, ts_tensor *idx, int64_t n, int64_t *small) {
    ts_tensor *cc = tsi_cast(op, idx, TS_I64);
    if (!cc) return NULL;
    int64_t *buf = n <= SMALL_INDEX ? small : malloc((size_t)n * sizeof(int64_t));
    if (!buf) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld indices", op, (long long)n);
    } else if (n > 0 && ts_copy_to_host(cc, buf, (size_t)n * sizeof(int64_t)) != TS_OK) {
        if (buf != small) free(buf);
        buf = NULL;
    }
    ts_release(cc);
    return buf;
}
static void free_host(int64_t *buf, int64_t *small) {
    if (buf != small) free(buf);
}

/* v and size - 1 - v both have a clear top bit exactly when 0 <= v < size (in unsigned arithmetic,
 * no overflow): an or and a subtraction per index; AVX2's variant takes four a step (gather of
 * 1e5 elements: the check's profile samples went from 27% of the kernel's to 17%) */
TS_CPU_BODY void range_bits_body(const int64_t *v, int64_t n, uint64_t last, uint64_t *out) {
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= (uint64_t)v[i] | (last - (uint64_t)v[i]);
    *out = bad;
}
TS_CPU_VARIANTS(range_bits, (const int64_t *v, int64_t n, uint64_t last, uint64_t *out),
                (v, n, last, out))

/* Every index value in [0, size): one vectorised pass, then a search only on failure. An int64
 * contiguous index on the cpu is read where it lies (no copy: this check cost more than gather
 * itself); a sim device's may have a copy still queued on its link (sim_link.c), so it is read
 * through ts_copy_to_host. A long index is checked in blocks shared among the threads. */
#define RANGE_BLOCK ((int64_t)1 << 15)
static bool any_out_of_range(const int64_t *v, int64_t n, int64_t size) {
    const uint64_t last = (uint64_t)size - 1;
    uint64_t bad = 0;
#ifdef TS_HAVE_OPENMP
    const int64_t nb = (n + RANGE_BLOCK - 1) / RANGE_BLOCK;
    if (nb > 1 && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static) reduction(| : bad)
        for (int64_t b = 0; b < nb; b++) {
            uint64_t part;
            const int64_t at = b * RANGE_BLOCK;
            range_bits(v + at, n - at < RANGE_BLOCK ? n - at : RANGE_BLOCK, last, &part);
            bad |= part;
        }
        return (bad >> 63) != 0;
    }
#endif
    range_bits(v, n, last, &bad);
    return (bad >> 63) != 0;
}
static bool has_broadcast_dim(const ts_tensor *t) {
    for (int i = 0; i < t->shape.ndim; i++)
        if (t->strides[i] == 0 && t->shape.dims[i] > 1) return true;
    return false;
}

static bool check_range(const char *op, ts_tensor *idx, int d, int64_t size) {
    int64_t n = tsi_numel(idx->shape);
    if (n == 0) return true;
    /* a captured step reads nothing on the host: its indices are the caller's to keep in range,
     * as with CUDA's asynchronous device asserts (docs/CAPTURE.md) */
    if (tsi_capturing_on(tsi_device(idx))) return true;
    /* nor does a meta op: its indices have no values (PyTorch's meta kernels check none) */
    if (tsi_device(idx).type == TS_META) return true;
    /* read before by a check against a size no larger (the loss's, the forward gather's) */
    if (tsi_index_range_known(idx, size)) return true;
    /* a broadcast index (expand: index_select's backward) reads each distinct element once */
    if (has_broadcast_dim(idx)) {
        ts_shape cs = idx->shape;
        for (int i = 0; i < cs.ndim; i++)
            if (idx->strides[i] == 0) cs.dims[i] = 1;
        ts_tensor *core = tsi_view_of(idx, cs, idx->strides, idx->offset);
        if (!core) return false;
        const bool ok = check_range(op, core, d, size);
        ts_release(core);
        return ok;
    }
    const bool in_place =
        tsi_device(idx).type == TS_CPU && idx->dtype == TS_I64 && tsi_is_contiguous(idx);
    int64_t small[SMALL_INDEX];
    int64_t *v = in_place ? (int64_t *)(idx->storage->data + idx->offset * (int64_t)sizeof *v)
                          : index_to_host(op, idx, n, small);
    if (!v) return false;
    const bool ok = !any_out_of_range(v, n, size);
    if (!ok) {
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (v[i] < 0 || v[i] >= size) {
                bad = v[i];
                break;
            }
        }
        tsi_error_set(TS_ERR_ARG, "%s: index %lld is out of bounds for dimension %d with size %lld",
                      op, (long long)bad, d, (long long)size);
    }
    if (!in_place) free_host(v, small);
    if (ok) tsi_index_range_note(idx, size);
    return ok;
}

/* PyTorch's refusals before an in-place write: autograd's, then a self-overlapping (expanded)
 * destination */
static bool check_inplace(const char *op, ts_tensor *t) {
    return tsi_check_inplace(op, t) && tsi_check_no_self_overlap(op, t);
}

/* Records an op whose gradient flows to t through the (i64) index along dim d. */
static void record_indexed(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *t,
                           ts_tensor *out, ts_tensor *idx, int d) {
    if (!out || !tsi_is_float(out->dtype)) return;
    ts_node *n = tsi_record(name, op, fn, &t, 1, out, &idx, 1);
    if (n) n->ip[0] = d, n->flags |= TSI_NODE_TWICE; /* a scatter_add of g (shape_grad.c) */
}

ts_tensor *ts_index_select(ts_tensor *t, int dim, ts_tensor *index) {
    const char *op = "index_select";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !tsi_check_input(op, index, "index")) return NULL;
    ts_tensor *ops[2] = {t, index};
    ts_device dev;
    if (!tsi_same_device(op, ops, 2, false, &dev)) return NULL;
    if (index->dtype != TS_I64 && index->dtype != TS_I32) {
        tsi_error_set(TS_ERR_DTYPE, "%s(): Expected dtype int32 or int64 for index, got %s", op,
                      ts_dtype_name(index->dtype));
        return NULL;
    }
    if (index->shape.ndim > 1) {
        tsi_error_set(TS_ERR_SHAPE, "%s(): Index is supposed to be a vector, got shape %s", op,
                      tsi_shape_str(index->shape));
        return NULL;
    }
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    const int64_t n = tsi_numel(index->shape);
    if (t->shape.ndim == 0 && n != 1) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s(): Index to scalar can have only 1 value, got %lld value(s)", op,
                      (long long)n);
        return NULL;
    }
    if (!check_range(op, index, d, size1(t, d))) return NULL;
    ts_tensor *idx = tsi_cast(op, index, TS_I64);
    if (!idx) return NULL;
    ts_shape os = t->shape;
    if (os.ndim > 0) os.dims[d] = n;
    tsi_prof_inputs_at(op, ops, 2); /* check_range ran ops */
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, os, t->dtype, dev);
    if (out && tsi_numel(os) > 0) {
        ts_kview ko = kview1(out), ki = kview1(t), kx = kview1(idx);
        tsi_be(t)->index_select(tsi_be(t), tsi_dev_index(t), &ko, &ki, d, &kx);
    }
    record_indexed("IndexSelectBackward0", op, tsi_index_select_backward, t, out, idx, d);
    ts_release(idx);
    return tsi_own(tsi_trace(op, (ts_tensor *[]){t, index}, 2, out, (int64_t[]){d}, 1, NULL, 0));
}

/* gather's and scatter's index: int64 or int32, or any dtype when it is empty (PyTorch checks the
 * dtype of an index with elements only) */
static bool index_dtype_ok(const ts_tensor *index) {
    return index->dtype == TS_I64 || index->dtype == TS_I32 || tsi_numel(index->shape) == 0;
}

ts_tensor *ts_gather(ts_tensor *t, int dim, ts_tensor *index) {
    const char *op = "gather";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !tsi_check_input(op, index, "index")) return NULL;
    ts_tensor *ops[2] = {t, index};
    ts_device dev;
    if (!tsi_same_device(op, ops, 2, false, &dev)) return NULL;
    if (!index_dtype_ok(index)) {
        tsi_error_set(TS_ERR_DTYPE, "%s(): Expected dtype int32/int64 for index, got %s", op,
                      ts_dtype_name(index->dtype));
        return NULL;
    }
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    /* an empty index gives an empty result of its shape, whatever its dims (PyTorch) */
    const bool empty = tsi_numel(index->shape) == 0;
    if (!empty && ndim1(index) != ndim1(t)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s(): Index tensor must have the same number of dimensions as input tensor "
                      "(got %s and %s)",
                      op, tsi_shape_str(index->shape), tsi_shape_str(t->shape));
        return NULL;
    }
    for (int k = 0; k < ndim1(t) && !empty; k++) {
        if (k == d || size1(index, k) <= size1(t, k)) continue;
        const char *si = tsi_shape_str(index->shape);
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Size does not match at dimension %d expected index %s to be no larger "
                      "than self %s apart from dimension %d",
                      op, k, si, tsi_shape_str(t->shape), d);
        return NULL;
    }
    if (!empty && !check_range(op, index, d, size1(t, d))) return NULL;
    ts_tensor *idx = tsi_cast(op, index, TS_I64); /* int32 indices as PyTorch takes them */
    if (!idx) return NULL;
    tsi_prof_inputs_at(op, ops, 2); /* check_range ran ops */
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, index->shape, t->dtype, dev);
    if (out && tsi_numel(index->shape) > 0) {
        ts_kview ko = kview1(out), ki = kview1(t), kx = kview1(idx);
        tsi_be(t)->gather(tsi_be(t), tsi_dev_index(t), &ko, &ki, d, &kx);
    }
    record_indexed("GatherBackward0", op, tsi_gather_backward, t, out, idx, d);
    ts_release(idx);
    return tsi_own(tsi_trace(op, (ts_tensor *[]){t, index}, 2, out, (int64_t[]){d}, 1, NULL, 0));
}

/* Checks for scatter_add(_) (and scatter, scatter_reduce in scatter.c): returns the wrapped
 * dim or -1. */
int tsi_scatter_check(const char *op, ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    tsi_init();
    if (!tsi_check_input(op, t, "self") || !tsi_check_input(op, index, "index") ||
        !tsi_check_input(op, src, "src"))
        return -1;
    ts_tensor *ops[3] = {t, index, src};
    ts_device dev;
    if (!tsi_same_device(op, ops, 3, false, &dev)) return -1;
    if (!index_dtype_ok(index)) {
        tsi_error_set(TS_ERR_DTYPE, "%s(): Expected dtype int32/int64 for index, got %s", op,
                      ts_dtype_name(index->dtype));
        return -1;
    }
    if (t->dtype != src->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s(): Expected self.dtype to be equal to src.dtype (got %s and %s)", op,
                      ts_dtype_name(t->dtype), ts_dtype_name(src->dtype));
        return -1;
    }
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return -1;
    if (tsi_numel(index->shape) == 0) return d; /* nothing to scatter: PyTorch checks no more */
    if (ndim1(index) != ndim1(t) || ndim1(index) != ndim1(src)) {
        const char *si = tsi_shape_str(index->shape), *st = tsi_shape_str(t->shape);
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Index tensor must have the same number of dimensions as self and src "
                      "tensors (got index %s, self %s, src %s)",
                      op, si, st, tsi_shape_str(src->shape));
        return -1;
    }
    for (int k = 0; k < ndim1(t); k++) {
        int64_t ik = size1(index, k);
        if (ik <= size1(src, k) && (k == d || ik <= size1(t, k))) continue;
        const char *si = tsi_shape_str(index->shape), *st = tsi_shape_str(t->shape);
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Expected index %s to be no larger than self %s apart from dimension %d "
                      "and to be no larger size than src %s",
                      op, si, st, d, tsi_shape_str(src->shape));
        return -1;
    }
    if (!check_range(op, index, d, size1(t, d))) return -1;
    return d;
}

static void scatter_run(ts_tensor *dst, int d, ts_tensor *index, ts_tensor *src) {
    if (tsi_numel(index->shape) == 0) return;
    ts_kview kd = kview1(dst), kx = kview1(index), ks = kview1(src);
    tsi_be(dst)->scatter_add(tsi_be(dst), tsi_dev_index(dst), &kd, d, &kx, &ks);
}

/* index as int64 (a new reference): int32 indices as PyTorch takes them */
static ts_tensor *index_i64(const char *op, ts_tensor *index) {
    return tsi_cast(op, index, TS_I64);
}

static void record_scatter(const char *op, ts_tensor *t, ts_tensor *index, ts_tensor *src,
                           ts_tensor *out, int d) {
    ts_tensor *ins[2] = {t, src};
    if (!tsi_is_float(out->dtype) || !tsi_needs_graph(ins, 2)) return;
    ts_node *n =
        tsi_record("ScatterAddBackward0", op, tsi_scatter_add_backward, ins, 2, out, &index, 1);
    if (n) n->ip[0] = d, n->flags |= TSI_NODE_TWICE; /* g, and a gather of g */
}

static ts_tensor *scatter_add_op(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    const char *op = "scatter_add";
    const int d = tsi_scatter_check(op, t, dim, index, src);
    if (d < 0) return NULL;
    tsi_prof_inputs_at(op, (ts_tensor *[]){t, index, src}, 3); /* its checks ran ops */
    tsi_log_op(op, tsi_device(t));
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, tsi_device(t));
    if (!out) return NULL;
    if (tsi_numel(t->shape) > 0) {
        ts_kview ko = tsi_kview(out), kt = tsi_kview(t);
        tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &ko, &kt);
    }
    ts_tensor *idx = index_i64(op, index);
    if (!idx) return ts_release(out), NULL;
    scatter_run(out, d, idx, src);
    record_scatter(op, t, idx, src, out, d);
    ts_release(idx);
    return tsi_own(out);
}

ts_tensor *ts_scatter_add(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    /* autocast's promote policy: t and src in the wider of their floating dtypes */
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "scatter_add", &t, &src);
    return tsi_autocast_exit(&ac, scatter_add_op(t, dim, index, src));
}

ts_tensor *ts_scatter_add_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    const char *op = "scatter_add_";
    const int d = tsi_scatter_check(op, t, dim, index, src);
    if (d < 0 || !check_inplace(op, t)) return NULL;
    ts_tensor *idx = index_i64(op, index);
    if (!idx) return NULL;
    tsi_log_op(op, tsi_device(t));
    scatter_run(t, d, idx, src);
    tsi_bump_version(t);
    record_scatter(op, t, idx, src, t, d); /* t's history now continues from this node */
    ts_release(idx);
    return tsi_own(ts_retain(t));
}

ts_tensor *ts_one_hot(ts_tensor *index, int64_t num_classes) {
    const char *op = "one_hot";
    tsi_init();
    if (!tsi_check_input(op, index, "index")) return NULL;
    if (index->dtype != TS_I64) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: one_hot is only applicable to index tensor of type LongTensor (got %s).",
                      op, ts_dtype_name(index->dtype));
        return NULL;
    }
    if (num_classes < -1) {
        tsi_error_set(TS_ERR_ARG, "%s: num_classes should be -1 or non-negative, got %lld", op,
                      (long long)num_classes);
        return NULL;
    }
    if (index->shape.ndim + 1 > TS_MAX_DIMS) {
        tsi_error_set(TS_ERR_SHAPE, "%s: result would have %d dims (at most %d)", op,
                      index->shape.ndim + 1, TS_MAX_DIMS);
        return NULL;
    }
    const int64_t n = tsi_numel(index->shape);
    int64_t classes = num_classes;
    if (n == 0) {
        if (classes == -1) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: Can not infer total number of classes from empty tensor.", op);
            return NULL;
        }
    } else if (tsi_device(index).type == TS_META) { /* no values to check or count */
        if (classes == -1) {
            tsi_error_set(TS_ERR_DEVICE,
                          "%s: the number of classes depends on the values, which a meta tensor "
                          "does not have: give num_classes",
                          op);
            return NULL;
        }
    } else {
        int64_t small[SMALL_INDEX];
        int64_t *v = index_to_host(op, index, n, small);
        if (!v) return NULL;
        int64_t lo = v[0], hi = v[0];
        for (int64_t i = 1; i < n; i++) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
        free_host(v, small);
        if (lo < 0) {
            tsi_error_set(TS_ERR_ARG, "%s: Class values must be non-negative.", op);
            return NULL;
        }
        if (classes == -1) classes = hi + 1;
        if (hi >= classes) {
            tsi_error_set(TS_ERR_ARG, "%s: Class values must be smaller than num_classes.", op);
            return NULL;
        }
    }
    ts_shape os = index->shape;
    os.dims[os.ndim++] = classes;
    const ts_device dev = tsi_device(index);
    const ts_backend *be = tsi_be(index);
    const int di = tsi_dev_index(index);
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, os, TS_I64, dev);
    if (!out || tsi_numel(os) == 0) return tsi_own(out);
    ts_kview ko = tsi_kview(out);
    be->fill(be, di, &ko, 0.0);
    /* scatter a broadcast 1 along the new last dim at each index value */
    ts_tensor *one = tsi_new(op, TS_SHAPE(), TS_I64, dev);
    if (!one) {
        ts_release(out);
        return NULL;
    }
    ts_kview k1 = tsi_kview(one), kx = tsi_kview(index);
    be->fill(be, di, &k1, 1.0);
    kx.shape[kx.ndim] = 1;
    kx.strides[kx.ndim] = 0;
    kx.ndim++;
    k1.ndim = kx.ndim;
    for (int k = 0; k < kx.ndim; k++) {
        k1.shape[k] = kx.shape[k];
        k1.strides[k] = 0;
    }
    be->scatter_add(be, di, &ko, kx.ndim - 1, &kx, &k1);
    ts_release(one);
    return tsi_own(out);
}
