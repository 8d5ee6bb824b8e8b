/* matmul.c — the mm, bmm and matmul front ends: PyTorch's shape rules, batch dims broadcast by
 * stride 0, one batched kernel call over 3-D views (no copies). */
#include <stdio.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/shape_grad.h"

typedef enum mm_kind { MM_MM, MM_BMM, MM_MATMUL } mm_kind;

/* PyTorch's C++ scalar type names, so its dtype error reads the same here. */
static const char *ctype_name(ts_dtype d) {
    switch (d) {
    case TS_F32:
        return "float";
    case TS_F64:
        return "double";
    case TS_F16:
        return "c10::Half";
    case TS_BF16:
        return "c10::BFloat16";
    case TS_I64:
        return "long int";
    case TS_I32:
        return "int";
    case TS_U8:
        return "unsigned char";
    case TS_I8:
        return "signed char";
    case TS_I16:
        return "short int";
    case TS_U16:
        return "unsigned short";
    case TS_U32:
        return "unsigned int";
    case TS_U64:
        return "unsigned long";
    case TS_BOOL:
        return "bool";
    default:
        return "undefined";
    }
}

/* "2x3" */
static const char *dims_x(int64_t r, int64_t c) {
    char *buf = tsi_fmt_buf();
    snprintf(buf, TSI_FMT_BUF_LEN, "%lldx%lld", (long long)r, (long long)c);
    return buf;
}

static bool check_operands(const char *op, mm_kind kind, ts_tensor *a, ts_tensor *b) {
    const char *na = kind == MM_BMM ? "batch1" : "mat1", *nb = kind == MM_BMM ? "batch2" : "mat2";
    const int nd = kind == MM_MM ? 2 : 3;
    const int da = a->shape.ndim, db = b->shape.ndim;
    if (kind != MM_MATMUL && (da != nd || db != nd))
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected %d-D tensors, got %s %s and %s %s", op, nd,
                             na, tsi_desc(a), nb, tsi_desc(b)),
               false;
    if (kind == MM_MATMUL && (da == 0 || db == 0))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: both arguments to matmul need to be at least 1D, but they are "
                             "%dD and %dD (%s and %s)",
                             op, da, db, tsi_desc(a), tsi_desc(b)),
               false;
    if (a->dtype != b->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected m1 and m2 to have the same dtype, but got: %s != %s (%s "
                             "and %s)",
                             op, ctype_name(a->dtype), ctype_name(b->dtype), tsi_desc(a),
                             tsi_desc(b)),
               false;
    if (a->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for 'Bool' (%s and %s)", op,
                             tsi_desc(a), tsi_desc(b)),
               false;
    const int64_t ka = a->shape.dims[da - 1], kb = b->shape.dims[db > 1 ? db - 2 : 0];
    if (kind == MM_BMM && a->shape.dims[0] != b->shape.dims[0])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: batch1 and batch2 must have the same batch size, got %s and %s",
                             op, tsi_shape_str(a->shape), tsi_shape_str(b->shape)),
               false;
    if (ka == kb) return true;
    if (kind == MM_MATMUL && da == 1 && db == 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: inconsistent tensor size, expected tensor [%lld] and src [%lld] "
                             "to have the same number of elements, but got %lld and %lld elements "
                             "respectively",
                             op, (long long)ka, (long long)kb, (long long)ka, (long long)kb),
               false;
    if (da <= 2 && db <= 2) /* 1-D operands as the row / column they are promoted to */
        return tsi_error_set(TS_ERR_SHAPE, "%s: %s and %s shapes cannot be multiplied (%s and %s)",
                             op, na, nb, dims_x(da == 2 ? a->shape.dims[0] : 1, ka),
                             dims_x(kb, db == 2 ? b->shape.dims[1] : 1)),
               false;
    return tsi_error_set(TS_ERR_SHAPE,
                         "%s: %s and %s shapes cannot be multiplied (%s and %s: %lld != %lld)", op,
                         na, nb, tsi_shape_str(a->shape), tsi_shape_str(b->shape), (long long)ka,
                         (long long)kb),
           false;
}

/* One batch dim of the kernel call: its size and the three operands' strides along it. */
typedef struct bdim {
    int64_t size, sa, sb, sc;
} bdim;

/* Calls the kernel once per index of the outer batch dims that could not be merged (only when
 * broadcasting interleaves, e.g. [2, 1, m, k] @ [3, k, n]). */
static void run_batches(const ts_backend *be, int index, ts_kview *ko, ts_kview *ka, ts_kview *kb,
                        const bdim *dims, int nd, size_t es) {
    ko->shape[0] = ka->shape[0] = kb->shape[0] = nd > 0 ? dims[nd - 1].size : 1;
    ko->strides[0] = nd > 0 ? dims[nd - 1].sc : 0;
    ka->strides[0] = nd > 0 ? dims[nd - 1].sa : 0;
    kb->strides[0] = nd > 0 ? dims[nd - 1].sb : 0;
    int64_t idx[TS_MAX_DIMS] = {0};
    char *a0 = ka->data, *b0 = kb->data, *c0 = ko->data;
    for (;;) {
        int64_t oa = 0, ob = 0, oc = 0;
        for (int i = 0; i < nd - 1; i++)
            oa += idx[i] * dims[i].sa, ob += idx[i] * dims[i].sb, oc += idx[i] * dims[i].sc;
        ka->data = a0 + oa * (int64_t)es;
        kb->data = b0 + ob * (int64_t)es;
        ko->data = c0 + oc * (int64_t)es;
        be->matmul(be, index, ko, ka, kb);
        int i = nd - 2;
        for (; i >= 0; i--) {
            if (++idx[i] < dims[i].size) break;
            idx[i] = 0;
        }
        if (i < 0) return;
    }
}

/* The product (a new reference, not in a scope) or NULL with the error recorded. */
static ts_tensor *matmul_compute(const char *op, mm_kind kind, ts_tensor *a, ts_tensor *b) {
    tsi_init();
    bool ok = tsi_check_input(op, a, kind == MM_BMM ? "batch1" : "mat1");
    ok = tsi_check_input(op, b, kind == MM_BMM ? "batch2" : "mat2") && ok;
    if (!ok) return NULL;
    ts_device dev;
    ts_tensor *both[2] = {a, b};
    if (!tsi_same_device(op, both, 2, false, &dev)) return NULL;
    if (!check_operands(op, kind, a, b)) return NULL;

    const int da = a->shape.ndim, db = b->shape.ndim;
    /* 1-D operands become a row (a) or a column (b); size-1 dims take stride 0 */
    const int64_t m = da >= 2 ? a->shape.dims[da - 2] : 1, k = a->shape.dims[da - 1];
    const int64_t n = db >= 2 ? b->shape.dims[db - 1] : 1;
    const int64_t rsa = da >= 2 ? a->strides[da - 2] : 0, csa = a->strides[da - 1];
    const int64_t rsb = b->strides[db >= 2 ? db - 2 : 0], csb = db >= 2 ? b->strides[db - 1] : 0;

    ts_shape ba = {.ndim = da > 2 ? da - 2 : 0}, bb = {.ndim = db > 2 ? db - 2 : 0}, batch;
    for (int i = 0; i < ba.ndim; i++) ba.dims[i] = a->shape.dims[i];
    for (int i = 0; i < bb.ndim; i++) bb.dims[i] = b->shape.dims[i];
    if (!tsi_broadcast_shapes(op, ba, bb, &batch)) return NULL;
    ts_shape os = batch;
    if (da >= 2) os.dims[os.ndim++] = m;
    if (db >= 2) os.dims[os.ndim++] = n;

    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, os, a->dtype, dev);
    if (!out || tsi_numel(os) == 0) return out;
    const ts_backend *be = tsi_be(a);
    if (!be->matmul) {
        ts_release(out);
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: not supported on %s", op, ts_device_str(dev)),
               NULL;
    }

    /* Batch dims, outermost first, with size-1 dims dropped and mergeable neighbours merged
     * (stride 0 where an operand is broadcast). The output is contiguous. */
    bdim dims[TS_MAX_DIMS];
    int nd = 0;
    int64_t sc = m * n;
    bdim rev[TS_MAX_DIMS];
    for (int i = batch.ndim - 1; i >= 0; i--) {
        int ia = i - (batch.ndim - ba.ndim), ib = i - (batch.ndim - bb.ndim);
        bdim d = {.size = batch.dims[i], .sc = sc};
        d.sa = ia >= 0 && ba.dims[ia] != 1 ? a->strides[ia] : 0;
        d.sb = ib >= 0 && bb.dims[ib] != 1 ? b->strides[ib] : 0;
        sc *= batch.dims[i];
        rev[batch.ndim - 1 - i] = d;
    }
    for (int j = batch.ndim - 1; j >= 0; j--) { /* outermost first */
        bdim d = rev[j];
        if (d.size == 1) continue;
        if (nd > 0) {
            bdim *p = &dims[nd - 1];
            if (p->sa == d.sa * d.size && p->sb == d.sb * d.size && p->sc == d.sc * d.size) {
                p->size *= d.size;
                p->sa = d.sa, p->sb = d.sb, p->sc = d.sc;
                continue;
            }
        }
        dims[nd++] = d;
    }

    ts_kview ka = tsi_kview(a), kb = tsi_kview(b), ko = tsi_kview(out);
    ka.ndim = kb.ndim = ko.ndim = 3;
    ka.shape[1] = m, ka.shape[2] = k, ka.strides[1] = rsa, ka.strides[2] = csa;
    kb.shape[1] = k, kb.shape[2] = n, kb.strides[1] = rsb, kb.strides[2] = csb;
    ko.shape[1] = m, ko.shape[2] = n, ko.strides[1] = n, ko.strides[2] = 1;
    /* b shared by every batch and a's batch running on into its rows ([B, m, k] @ [k, n], as in a
     * linear layer): one GEMM of B*m rows beats B small ones */
    if (nd == 1 && dims[0].sb == 0 && (m == 1 || dims[0].sa == m * rsa)) {
        ka.strides[1] = m == 1 ? dims[0].sa : rsa;
        ko.strides[1] = m == 1 ? dims[0].sc : n;
        ka.shape[1] = ko.shape[1] = m * dims[0].size;
        nd = 0;
    }
    run_batches(be, tsi_dev_index(a), &ko, &ka, &kb, dims, nd, tsi_dtype_size(a->dtype));
    return out;
}

/* The name PyTorch's matmul gives the last node of its decomposition into mm/mv/dot/bmm. */
static const char *matmul_grad_name(mm_kind kind, int da, int db) {
    if (kind == MM_MM) return "MmBackward0";
    if (kind == MM_BMM) return "BmmBackward0";
    if (da == 1 && db == 1) return "DotBackward0";
    if (da == 2 && db == 1) return "MvBackward0";
    if (da == 2 && db == 2) return "MmBackward0";
    if (da == 1 && db == 2) return "SqueezeBackward3";
    if (da == 2) return "CloneBackward0";
    return "UnsafeViewBackward0";
}

static ts_tensor *matmul_record(const char *op, mm_kind kind, ts_tensor *a, ts_tensor *b) {
    ts_tensor *out = matmul_compute(op, kind, a, b);
    ts_tensor *ins[2] = {a, b};
    if (out && tsi_is_float(out->dtype) && tsi_needs_graph(ins, 2)) {
        /* each operand's gradient needs only the other operand */
        ts_tensor *saves[2] = {b->requires_grad ? a : NULL, a->requires_grad ? b : NULL};
        ts_node *n = tsi_record(matmul_grad_name(kind, a->shape.ndim, b->shape.ndim), op,
                                tsi_matmul_backward, ins, 2, out, saves, 2);
        /* b's layout, for a gradient in the same layout (b itself may not be saved); the
         * backward is matmuls of the gradient with the operands (shape_grad.c) */
        if (n) n->flags |= TSI_NODE_TWICE;
        if (n)
            n->ip[0] = b->shape.ndim == 2 && b->strides[0] == 1 &&
                       b->strides[1] == b->shape.dims[0] && b->shape.dims[0] > 1 &&
                       b->shape.dims[1] > 1;
    }
    return tsi_own(out);
}

static ts_tensor *matmul_op(const char *op, mm_kind kind, ts_tensor *a, ts_tensor *b) {
    if (tsi_complex_in(a, b)) { /* complex_linalg.c: real products over the parts */
        ts_tensor *(*f)(ts_tensor *, ts_tensor *) = ts_matmul;
        if (kind != MM_MATMUL) f = kind == MM_MM ? ts_mm : ts_bmm;
        return tsi_complex_matmul(op, f, a, b, false);
    }
    ts_tensor *const ins[2] = {a, b};
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &a, &b);
    return tsi_trace(op, ins, 2, tsi_autocast_exit(&ac, matmul_record(op, kind, a, b)), NULL, 0,
                     NULL, 0);
}

ts_tensor *ts_mm(ts_tensor *a, ts_tensor *b) { return matmul_op("mm", MM_MM, a, b); }
ts_tensor *ts_bmm(ts_tensor *a, ts_tensor *b) { return matmul_op("bmm", MM_BMM, a, b); }
ts_tensor *ts_matmul(ts_tensor *a, ts_tensor *b) { return matmul_op("matmul", MM_MATMUL, a, b); }
