/* test_xformer_paths.c — the GPT-mini step's faster paths against the paths they replaced:
 * MultiheadAttention's packed q, k, v split by one SplitBackward0 node against the three selects
 * it replaced (the same output and gradients, bit for bit). Runs under each ISA cap
 * (tests/CMakeLists.txt). */
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* every element of a and b equal (==: -0 and +0 are the same gradient) */
static bool same_values(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return false;
    const int64_t n = ts_numel(a);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
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
    ts_tensor *qkv = ts_linear(x, ts_module_get(m, "in_proj_weight"),
                               ts_module_get(m, "in_proj_bias"));
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

int main(void) {
    if (ts_test_isa_gate()) return 77;
    test_qkv_split();
    return ts_test_finish();
}
