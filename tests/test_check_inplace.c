/* test_check_inplace.c — ts_check_inplace (tessera/inplace.h): PyTorch's refusals before an
 * in-place op, and ts_clamp_tensor_ on a tensor with history (computed from a clone, so its
 * backward does not find its saved input changed). */
#include <string.h>

#include "tessera/complex.h"
#include "tessera/inplace.h"
#include "ts_test.h"

static int64_t live_cpu(void) {
    ts_mem_stats s;
    ts_memory_stats(ts_cpu(), &s);
    return s.live_tensors;
}

static void test_refusals(void) {
    const float v[6] = {-1, 2, -3, 4, 0.5f, -0.5f};
    ts_scope_begin();
    ts_tensor *leaf = ts_from_data(TS_SHAPE(2, 3), TS_F32, v, (ts_opts){0});
    ts_tensor *plain = ts_from_data(TS_SHAPE(2, 3), TS_F32, v, (ts_opts){0});
    ts_set_requires_grad(leaf, true);
    CHECK_OK();
    /* a leaf that requires grad */
    CHECK_EQ(ts_check_inplace(leaf, false, "sin_"), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "sin_: a leaf Variable that requires grad");
    /* a tensor with history and a view of it: allowed (its base takes the write: CopySlices);
     * a view of a leaf that requires grad: not */
    ts_tensor *y = ts_mul_scalar(leaf, 1.0);
    CHECK_EQ(ts_check_inplace(y, true, "cos_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ts_select(y, 0, 1), false, "cos_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ts_select(leaf, 0, 1), false, "cos_"), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "cos_: a view of a leaf Variable that requires grad is being used "
                                "in an in-place operation.");
    /* a view of a plain tensor: allowed, with an operand that requires grad too */
    ts_tensor *pv = ts_select(plain, 0, 0);
    CHECK_EQ(ts_check_inplace(pv, false, "hypot_"), TS_OK);
    CHECK_EQ(ts_check_inplace(pv, true, "hypot_"), TS_OK);
    /* ... unless made under no_grad */
    ts_no_grad_begin();
    ts_tensor *ngv = ts_select(plain, 0, 0);
    ts_no_grad_end();
    CHECK_EQ(ts_check_inplace(ngv, false, "hypot_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ngv, true, "hypot_"), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "hypot_: A view was created in no_grad mode");
    /* an alias whose base is unknown (detach) written with an operand that requires grad */
    ts_tensor *dv = ts_detach(plain);
    CHECK_EQ(ts_check_inplace(dv, true, "hypot_"), TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "hypot_: in-place operation on a view");
    CHECK_EQ(ts_check_inplace(dv, true, "hypot_"), TS_ERR_UNSUPPORTED); /* the advice, too */
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "is not supported; apply it to a clone");
    /* no op name: the messages say "in-place op" */
    CHECK_EQ(ts_check_inplace(leaf, false, NULL), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "in-place op: a leaf Variable");
    /* grad mode off: everything may */
    ts_no_grad_begin();
    CHECK_EQ(ts_check_inplace(leaf, true, "sin_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ts_select(y, 0, 1), true, "sin_"), TS_OK);
    ts_no_grad_end();
    CHECK_EQ(ts_check_inplace(NULL, false, "sin_"), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "sin_: input");
    /* a complex tensor: the check is structural; the out-of-place op gates its dtype */
    ts_tensor *z = ts_complex(plain, plain);
    CHECK(z != NULL);
    CHECK_EQ(ts_check_inplace(z, false, "sgn_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ts_select(z, 0, 0), true, "sgn_"), TS_OK);
    CHECK_EQ(ts_check_inplace(ts_detach(z), true, "sgn_"), TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "sgn_: in-place operation on a view");
    ts_scope_end();
    CHECK_OK();
}

/* y = leaf * 1; y.clamp_(min = 0 as a tensor); sum(y).backward(): d/dleaf = [leaf > 0] */
static void test_clamp_tensor_inplace_backward(void) {
    const float v[6] = {-1, 2, -3, 4, 0.5f, -0.5f}, zero = 0;
    ts_tensor *leaf = ts_from_data(TS_SHAPE(2, 3), TS_F32, v, (ts_opts){0});
    ts_set_requires_grad(leaf, true);
    ts_scope_begin();
    ts_tensor *lo = ts_from_data((ts_shape){0}, TS_F32, &zero, (ts_opts){0});
    ts_tensor *y = ts_mul_scalar(leaf, 1.0);
    CHECK(ts_clamp_tensor_(y, lo, NULL) != NULL);
    CHECK_OK();
    ts_backward(ts_sum(y));
    CHECK_OK();
    float g[6] = {0}, out[6] = {0};
    CHECK(ts_grad(leaf) != NULL);
    if (ts_grad(leaf)) CHECK_EQ(ts_copy_to_host(ts_grad(leaf), g, sizeof g), TS_OK);
    CHECK_EQ(ts_copy_to_host(y, out, sizeof out), TS_OK);
    for (int i = 0; i < 6; i++) {
        CHECK_NEAR(g[i], v[i] > 0 ? 1.0 : 0.0, 0);
        CHECK_NEAR(out[i], v[i] > 0 ? v[i] : 0.0, 0);
    }
    ts_scope_end();
    ts_release(leaf);
    CHECK_OK();
}

/* tsi_check_no_self_overlap: an in-place write through a stride-0 dim of more than one element is
 * refused (several elements are one memory location); a stride-0 dim of one element (or none) is
 * no overlap: the write goes through, as in PyTorch */
static void test_self_overlap(void) {
    const float v[3] = {1, 2, 3};
    ts_scope_begin();
    ts_tensor *x = ts_from_data(TS_SHAPE(3), TS_F32, v, (ts_opts){0});
    const int64_t one[2] = {0, 1}, three[2] = {1, 0};
    ts_tensor *row = ts_as_strided(x, TS_SHAPE(1, 3), one, 0); /* [1, 3], strides (0, 1) */
    CHECK(row != NULL && ts_add_scalar_(row, 10) != NULL);
    CHECK_OK();
    float got[3];
    CHECK(ts_copy_to_host(x, got, sizeof got) == TS_OK && got[0] == 11 && got[2] == 13);
    ts_tensor *empty = ts_as_strided(x, TS_SHAPE(0, 3), one, 0); /* no element at all */
    CHECK(empty != NULL && ts_add_scalar_(empty, 10) != NULL);
    CHECK_OK();
    ts_tensor *rep = ts_as_strided(x, TS_SHAPE(3, 2), three, 0); /* [3, 2], strides (1, 0) */
    CHECK(rep != NULL && ts_add_scalar_(rep, 10) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "single memory location");
    CHECK(ts_copy_to_host(x, got, sizeof got) == TS_OK && got[0] == 11);
    ts_scope_end();
}

int main(void) {
    int64_t live0 = live_cpu();
    test_refusals();
    test_self_overlap();
    test_clamp_tensor_inplace_backward();
    CHECK_EQ(live_cpu(), live0);
    return ts_test_finish();
}
