/* test_xformer_paths.c — the GPT-mini step's faster paths against the paths they replaced:
 * MultiheadAttention's packed q, k, v split by one SplitBackward0 node against the three selects
 * it replaced (the same output and gradients, bit for bit); linear's product and bias in one
 * backend call (AddmmBackward0; oneDNN's bias argument where its primitive multiplies) against
 * mm followed by an add, bit for bit, for the products of every provider's size. Runs under each
 * ISA cap (tests/CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul_dnnl.h"
#include "ts_test.h"

/* every element of a and b equal (==: -0 and +0 are the same gradient) */
static bool same_values(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return false;
    const int64_t n = ts_numel(a);
    a = ts_to_dtype(a, TS_F64), b = ts_to_dtype(b, TS_F64);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    bool ok = x && y && ts_copy_to_host(ts_contiguous(a), x, (size_t)n * sizeof *x) == TS_OK &&
              ts_copy_to_host(ts_contiguous(b), y, (size_t)n * sizeof *y) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = x[i] == y[i];
    free(x), free(y);
    return ok;
}

/* The previous composition of ts_multihead_attention's causal self-attention: three selects of
 * the permuted packed projection. */
static ts_tensor *mha_by_selects(ts_module *m, ts_tensor *x, int64_t H) {
    const int64_t N = ts_size(x, 0), L = ts_size(x, 1), E = ts_size(x, 2);
    ts_tensor *qkv =
        ts_linear(x, ts_module_get(m, "in_proj_weight"), ts_module_get(m, "in_proj_bias"));
    ts_tensor *p =
        ts_permute(ts_reshape(qkv, TS_SHAPE(N, L, 3, H, E / H)), (ts_dims){5, {2, 0, 3, 1, 4}});
    ts_tensor *o = ts_scaled_dot_product_attention(ts_select(p, 0, 0), ts_select(p, 0, 1),
                                                   ts_select(p, 0, 2), NULL, 0, true, 0);
    o = ts_reshape(ts_permute(o, (ts_dims){4, {0, 2, 1, 3}}), TS_SHAPE(N, L, E));
    return ts_forward(ts_module_child(m, "out_proj"), o);
}

static void test_qkv_split(void) {
    const int64_t shapes[][4] = {{2, 7, 12, 3}, {3, 64, 32, 4}, {1, 130, 64, 2}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int64_t N = shapes[c][0], L = shapes[c][1], E = shapes[c][2], H = shapes[c][3];
        ts_manual_seed(7 + (uint64_t)c);
        ts_module *m = ts_multihead_attention_new(E, H, (ts_mha_opts){.batch_first = true});
        ts_scope_begin();
        ts_tensor *x = ts_randn(TS_SHAPE(N, L, E), (ts_opts){.requires_grad = true});
        ts_tensor *r = ts_randn(TS_SHAPE(N, L, E), (ts_opts){0});
        ts_tensor *grads[2][4] = {{0}};
        for (int path = 0; path < 2; path++) {
            ts_tensor_list ps = ts_module_named_parameters(m);
            for (int i = 0; i < ps.n; i++) ts_set_grad(ps.tensors[i], NULL);
            ts_tensor_list_free(&ps);
            ts_set_grad(x, NULL);
            ts_tensor *y = path ? mha_by_selects(m, x, H)
                                : ts_multihead_attention(m, x, x, x, NULL, NULL, true, false, NULL);
            ts_backward(ts_sum(ts_mul(y, r)));
            grads[path][0] = ts_detach(y);
            grads[path][1] = ts_clone(ts_grad(x));
            grads[path][2] = ts_clone(ts_grad(ts_module_get(m, "in_proj_weight")));
            grads[path][3] = ts_clone(ts_grad(ts_module_get(m, "in_proj_bias")));
        }
        CHECK_OK();
        for (int i = 0; i < 4; i++) CHECK(same_values(grads[0][i], grads[1][i]));
        ts_scope_end();
        ts_module_free(m);
    }
}

/* ts_linear (fused where it applies) against ts_mm + ts_add: output and the three gradients */
static void test_linear_bias(void) {
    typedef struct {
        int64_t lead, rows, in, out;
        ts_dtype dt;
        bool w_grad;
    } lin_case;
    const lin_case cases[] = {
        {0, 3, 5, 4, TS_F32, true},        /* a few multiply-adds: the direct loop */
        {0, 64, 784, 128, TS_F32, true},   /* gemm_small */
        {0, 200, 96, 72, TS_F32, true},    /* the library's sgemm */
        {16, 256, 256, 768, TS_F32, true}, /* the GPT-mini's in_proj: oneDNN's primitive */
        {0, 512, 256, 256, TS_F32, false}, /* a frozen weight */
        {4, 33, 40, 24, TS_F64, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const lin_case *lc = &cases[c];
        ts_manual_seed(100 + (uint64_t)c);
        ts_scope_begin();
        const ts_opts o = {.dtype = lc->dt};
        ts_shape xs = lc->lead ? TS_SHAPE(lc->lead, lc->rows, lc->in) : TS_SHAPE(lc->rows, lc->in);
        ts_tensor *x = ts_randn(xs, o), *w = ts_randn(TS_SHAPE(lc->out, lc->in), o);
        ts_tensor *b = ts_randn(TS_SHAPE(lc->out), o);
        ts_set_requires_grad(x, true), ts_set_requires_grad(b, true);
        ts_set_requires_grad(w, lc->w_grad);
        ts_shape ys = xs;
        ys.dims[ys.ndim - 1] = lc->out;
        ts_tensor *r = ts_randn(ys, o), *res[2][4] = {{0}};
        const uint64_t runs0 = tsi_dnnl_matmul_count();
        for (int path = 0; path < 2; path++) {
            ts_set_grad(x, NULL), ts_set_grad(w, NULL), ts_set_grad(b, NULL);
            ts_tensor *y;
            if (path == 0) {
                y = ts_linear(x, w, b);
            } else {
                ts_tensor *x2 = ts_reshape(x, TS_SHAPE(-1, lc->in));
                y = ts_view(ts_add(ts_mm(x2, ts_t(w)), b), ys);
            }
            ts_backward(ts_sum(ts_mul(y, r)));
            res[path][0] = ts_detach(y);
            res[path][1] = ts_clone(ts_grad(x));
            res[path][2] = lc->w_grad ? ts_clone(ts_grad(w)) : ts_zeros(TS_SHAPE(1), o);
            res[path][3] = ts_clone(ts_grad(b));
        }
        CHECK_OK();
        CHECK(lc->w_grad || !ts_grad(w));
        for (int i = 0; i < 4; i++) CHECK(same_values(res[0][i], res[1][i]));
        if (lc->rows == 256 && lc->dt == TS_F32)
            printf("linear %lldx%lldx%lld: %llu oneDNN matmul primitive runs\n",
                   (long long)(lc->lead * lc->rows), (long long)lc->in, (long long)lc->out,
                   (unsigned long long)(tsi_dnnl_matmul_count() - runs0));
        ts_scope_end();
    }
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    test_qkv_split();
    test_linear_bias();
    return ts_test_finish();
}
