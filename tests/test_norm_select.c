/* test_norm_select.c — the CPU normalisations' one selector (src/backend/cpu/norm_select.c): each
 * row of its table at its edge (the value on one side and the next on the other), so a changed
 * threshold fails here, and the rules around them: layer norm's kernels float32 / float64 only
 * (half inputs declined, for src/nn/norm.c's float32 copies), batch norm's also float16 / bfloat16,
 * at least two values a channel, channels_last to the NHWC kernels; the vector variant the best the
 * CPU has under TS_CPU_ISA; the CPU backend's entries answering as the selector does, and layer
 * norm's workspace following its partition. */
#include <stdio.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/norm_select.h"
#include "core/internal.h"
#include "ts_test.h"

#define COMPOSED TSI_NORM_PATH_COMPOSED

static ts_layer_norm_args ln(ts_dtype dt, int64_t rows, int64_t cols) {
    return (ts_layer_norm_args){.x = {.dtype = dt}, .rows = rows, .cols = cols};
}

static ts_batch_norm_args bn(ts_dtype dt, int64_t n, int64_t c, int64_t hw, bool nhwc) {
    return (ts_batch_norm_args){
        .x = {.dtype = dt}, .n = n, .c = c, .hw = hw, .channels_last = nhwc};
}

static tsi_norm_path sel_ln(ts_layer_norm_args a) { return tsi_norm_select_layer(&a); }
static tsi_norm_path sel_bn(ts_batch_norm_args a) { return tsi_norm_select_batch(&a); }

/* rows per block and blocks of the NHWC partition */
static int64_t nhwc_nb(int64_t rows, int64_t c) {
    int64_t rb, nb;
    tsi_norm_batch_nhwc_blocks(rows, c, &rb, &nb);
    CHECK(rb >= 1 && nb >= 1 && (nb - 1) * rb < rows && nb * rb >= rows); /* covers the rows */
    return nb;
}

static int64_t nhwc_rb(int64_t rows, int64_t c) {
    int64_t rb, nb;
    tsi_norm_batch_nhwc_blocks(rows, c, &rb, &nb);
    return rb;
}

static void test_paths(void) {
    /* layer norm: float32 and float64 rows; half dtypes, empty rows or columns composed */
    CHECK_EQ(sel_ln(ln(TS_F32, 1, 1)), TSI_NORM_PATH_ROWS);
    CHECK_EQ(sel_ln(ln(TS_F64, 7, 4099)), TSI_NORM_PATH_ROWS);
    CHECK_EQ(sel_ln(ln(TS_F16, 7, 64)), COMPOSED);
    CHECK_EQ(sel_ln(ln(TS_BF16, 7, 64)), COMPOSED);
    CHECK_EQ(sel_ln(ln(TS_I32, 7, 64)), COMPOSED);
    CHECK_EQ(sel_ln(ln(TS_F32, 0, 64)), COMPOSED);
    CHECK_EQ(sel_ln(ln(TS_F32, 7, 0)), COMPOSED);

    /* batch norm: the four float dtypes, NCHW or NHWC as the tensor lies */
    const ts_dtype fl[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(sel_bn(bn(fl[i], 2, 3, 5, false)), TSI_NORM_PATH_CHANNELS);
        CHECK_EQ(sel_bn(bn(fl[i], 2, 3, 5, true)), TSI_NORM_PATH_NHWC);
    }
    CHECK_EQ(sel_bn(bn(TS_I32, 2, 3, 5, false)), COMPOSED);
    CHECK_EQ(sel_bn(bn(TS_I64, 2, 3, 5, true)), COMPOSED);
    /* at least two values a channel: n * hw = 2 either way round, not 1; hw == 1 ([n, c]: already
     * channels-last as it lies) takes the NHWC kernels, whose rows are the samples */
    CHECK_EQ(sel_bn(bn(TS_F32, 2, 3, 1, false)), TSI_NORM_PATH_NHWC);
    CHECK_EQ(sel_bn(bn(TS_F64, 1568, 384, 1, false)), TSI_NORM_PATH_NHWC);
    CHECK_EQ(sel_bn(bn(TS_F32, 2, 3, 2, false)), TSI_NORM_PATH_CHANNELS);
    CHECK_EQ(sel_bn(bn(TS_F32, 1, 3, 2, true)), TSI_NORM_PATH_NHWC);
    CHECK_EQ(sel_bn(bn(TS_F32, 1, 3, 1, false)), COMPOSED);
    CHECK_EQ(sel_bn(bn(TS_F32, 1, 3, 1, true)), COMPOSED);
    CHECK_EQ(sel_bn(bn(TS_F32, 0, 3, 4, false)), COMPOSED);
    CHECK_EQ(sel_bn(bn(TS_F32, 2, 0, 4, false)), COMPOSED);
    CHECK_EQ(sel_bn(bn(TS_F32, 2, 3, 0, false)), COMPOSED);

    /* the CPU backend's entries answer as the selector does */
    const ts_backend *be = tsi_backend_for(TS_CPU);
    ts_layer_norm_args la[4] = {ln(TS_F32, 3, 5), ln(TS_F16, 3, 5), ln(TS_F64, 1, 1),
                                ln(TS_F32, 0, 5)};
    for (int i = 0; i < 4; i++)
        CHECK_EQ(be->layer_norm_supports(be, 0, &la[i]), sel_ln(la[i]) != COMPOSED);
    ts_batch_norm_args ba[4] = {bn(TS_BF16, 2, 3, 5, true), bn(TS_F32, 1, 3, 1, false),
                                bn(TS_I32, 2, 3, 5, false), bn(TS_F64, 2, 3, 5, false)};
    for (int i = 0; i < 4; i++)
        CHECK_EQ(be->batch_norm_supports(be, 0, &ba[i]), sel_bn(ba[i]) != COMPOSED);

        /* the variant: the best the CPU has under TS_CPU_ISA (ctest reruns this under the caps) */
#if defined(__GNUC__) && defined(__x86_64__)
    CHECK_EQ(tsi_norm_variant(), (int)ts_cpu_isa_get());
#else
    CHECK_EQ(tsi_norm_variant(), 0);
#endif
    printf("norm variant here: %d\n", tsi_norm_variant());
}

static void test_threads(const tsi_norm_limits *lim) {
    /* one thread below 32768 elements, or with one task */
    CHECK_EQ(lim->parallel_min_elems, 32768);
    CHECK(tsi_norm_parallel(32768, 2));
    CHECK(!tsi_norm_parallel(32767, 2));
    CHECK(!tsi_norm_parallel(1 << 20, 1));
    CHECK(tsi_norm_parallel(1 << 20, 3));
}

static void test_layer_blocks(const tsi_norm_limits *lim) {
    /* blocks of at least 32 rows, at most 64 of them; a block a row without dweight / dbias */
    CHECK_EQ(lim->ln_block_min_rows, 32);
    CHECK_EQ(lim->ln_max_blocks, 64);
    CHECK_EQ(tsi_norm_layer_blocks(5, false), 5);
    CHECK_EQ(tsi_norm_layer_blocks(100000, false), 100000);
    CHECK_EQ(tsi_norm_layer_blocks(1, true), 1);
    CHECK_EQ(tsi_norm_layer_blocks(63, true), 1);
    CHECK_EQ(tsi_norm_layer_blocks(64, true), 2);
    CHECK_EQ(tsi_norm_layer_blocks(95, true), 2);
    CHECK_EQ(tsi_norm_layer_blocks(96, true), 3);
    CHECK_EQ(tsi_norm_layer_blocks(64 * 32 - 1, true), 63);
    CHECK_EQ(tsi_norm_layer_blocks(64 * 32, true), 64);
    CHECK_EQ(tsi_norm_layer_blocks(65 * 32, true), 64);
    CHECK_EQ(tsi_norm_layer_blocks(1 << 24, true), 64);

    /* the kernels' workspace follows that partition: blocks x (2 x cols rounded up to 16) sums in
     * double and in the dtype */
    const ts_backend *be = tsi_backend_for(TS_CPU);
    char dummy = 0;
    ts_layer_norm_args a = ln(TS_F32, 65 * 32, 20);
    a.dweight.data = &dummy;
    CHECK_EQ(be->layer_norm_workspace(be, 0, &a), (size_t)(64 * 2 * 32) * (8 + 4));
    a.rows = 95, a.x.dtype = TS_F64;
    CHECK_EQ(be->layer_norm_workspace(be, 0, &a), (size_t)(2 * 2 * 32) * (8 + 8));
    a.dweight.data = NULL;
    CHECK_EQ(be->layer_norm_workspace(be, 0, &a), (size_t)0);
}

static void test_batch_groups(const tsi_norm_limits *lim) {
    /* NCHW: enough channels for 512 elements a sample, at most 64, at least 4 tasks */
    CHECK_EQ(lim->bn_group_min_elems, 512);
    CHECK_EQ(lim->bn_max_group, 64);
    CHECK_EQ(lim->bn_max_group, TSI_NORM_BN_MAX_GROUP);
    CHECK_EQ(lim->bn_min_tasks, 4);
    CHECK_EQ(tsi_norm_batch_group(1024, 512), 1);
    CHECK_EQ(tsi_norm_batch_group(1024, 511), 2);
    CHECK_EQ(tsi_norm_batch_group(1024, 256), 2);
    CHECK_EQ(tsi_norm_batch_group(1024, 255), 3);
    CHECK_EQ(tsi_norm_batch_group(1024, 9), 57);
    CHECK_EQ(tsi_norm_batch_group(1024, 8), 64);
    CHECK_EQ(tsi_norm_batch_group(1024, 7), 64);
    CHECK_EQ(tsi_norm_batch_group(1024, 1), 64);
    CHECK_EQ(tsi_norm_batch_group(100000, 100000), 1);
    /* four tasks at least: 20 channels of one element make 4 tasks of 5 */
    CHECK_EQ(tsi_norm_batch_group(20, 1), 5);
    CHECK_EQ(tsi_norm_batch_group(17, 1), 5);
    CHECK_EQ(tsi_norm_batch_group(16, 1), 4);
    CHECK_EQ(tsi_norm_batch_group(3, 1), 1);
    CHECK_EQ(tsi_norm_batch_group(1, 4), 1);
}

static void test_nhwc_blocks(const tsi_norm_limits *lim) {
    /* NHWC: blocks of rows of at least 32768 elements, at most 32 blocks, at most a block a row */
    CHECK_EQ(lim->bn_nhwc_block_min_elems, 32768);
    CHECK_EQ(lim->bn_nhwc_max_blocks, 32);
    CHECK_EQ(nhwc_nb(32768, 1), 1);
    CHECK_EQ(nhwc_nb(32769, 1), 2);
    CHECK_EQ(nhwc_rb(32769, 1), 16385);
    CHECK_EQ(nhwc_nb(512, 64), 1);
    CHECK_EQ(nhwc_nb(513, 64), 2);
    CHECK_EQ(nhwc_nb(32 * 32768, 1), 32);
    CHECK_EQ(nhwc_rb(32 * 32768, 1), 32768);
    CHECK_EQ(nhwc_nb(32 * 32768 + 1, 1), 32);
    CHECK_EQ(nhwc_rb(32 * 32768 + 1, 1), 32769);
    CHECK_EQ(nhwc_nb(1 << 26, 16), 32);
    CHECK_EQ(nhwc_nb(5, 0), 1); /* nothing to split: one block */
    /* never more blocks than rows: 3 rows of 100000 channels */
    CHECK_EQ(nhwc_nb(3, 100000), 3);
    CHECK_EQ(nhwc_rb(3, 100000), 1);
    /* the last block short: 10 rows in 4 -> 3 rows a block, 4 blocks (3 + 3 + 3 + 1) */
    CHECK_EQ(nhwc_nb(10, 4 * 32768 / 10), 4);
    CHECK_EQ(nhwc_rb(10, 4 * 32768 / 10), 3);
    /* 7 rows in 6 wanted -> 2 rows a block, 4 blocks: the count follows the rows a block */
    CHECK_EQ(nhwc_nb(7, 6 * 32768 / 7), 4);
    CHECK_EQ(nhwc_rb(7, 6 * 32768 / 7), 2);
}

int main(void) {
    tsi_init(); /* the backends */
    const tsi_norm_limits *lim = tsi_norm_limits_get();
    test_paths();
    test_threads(lim);
    test_layer_blocks(lim);
    test_batch_groups(lim);
    test_nhwc_blocks(lim);
    return ts_test_finish();
}
