/* op_samples.c — the sample inputs of each row family: layouts, broadcasts, empty and 0-dim cases.
 */
#include <math.h>
#include <string.h>

#include "op_table.h"

typedef struct builder {
    ot_sample *v;
    int n, max;
} builder;

static const ot_args no_args = {0};

static ot_sample *push(builder *b, const char *label, ot_args args, int n_in, const ot_in *ins) {
    if (b->n >= b->max) return NULL;
    ot_sample *s = &b->v[b->n++];
    memset(s, 0, sizeof *s);
    s->label = label;
    s->n_in = n_in;
    for (int i = 0; i < n_in; i++) s->in[i] = ins[i];
    s->args = args;
    s->args.n_in = n_in;
    return s;
}

static ot_in in_row(ts_shape s, ot_layout l) { return (ot_in){s, l, OT_ROW, 0}; }
static ot_in in_idx(ts_shape s, int64_t hi, ot_layout l) { return (ot_in){s, l, OT_INDEX, hi}; }
static ot_in in_mask(ts_shape s, ot_layout l) { return (ot_in){s, l, OT_MASK, 0}; }

#define LARGE TS_SHAPE(130, 260) /* 33800 elements: past the kernels' OpenMP threshold */

static void one(builder *b, const char *label, ot_args a, ts_shape s, ot_layout l) {
    ot_in i = in_row(s, l);
    push(b, label, a, 1, &i);
}
static void two(builder *b, const char *label, ot_args a, ot_in x, ot_in y) {
    ot_in i[2] = {x, y};
    push(b, label, a, 2, i);
}
static void three(builder *b, const char *label, ot_args a, ot_in x, ot_in y, ot_in z) {
    ot_in i[3] = {x, y, z};
    push(b, label, a, 3, i);
}
static void mark_last(builder *b, bool specials, bool large) {
    if (b->n == 0) return;
    b->v[b->n - 1].specials = specials;
    b->v[b->n - 1].large = large;
}

/* One input in every layout, each with the given args. */
static void unary_layouts(builder *b, ot_args a, bool with_specials) {
    one(b, "contiguous", a, TS_SHAPE(5, 7), OT_CONTIG);
    one(b, "transposed", a, TS_SHAPE(3, 4), OT_TRANSPOSED);
    one(b, "sliced step 2", a, TS_SHAPE(3, 4), OT_SLICED);
    one(b, "expanded", a, TS_SHAPE(3, 4), OT_EXPANDED);
    one(b, "3-d transposed", a, TS_SHAPE(2, 3, 4), OT_TRANSPOSED);
    one(b, "empty", a, TS_SHAPE(0, 3), OT_CONTIG);
    one(b, "0-dim", a, TS_SHAPE(), OT_CONTIG);
    one(b, "large", a, LARGE, OT_CONTIG);
    mark_last(b, false, true);
    one(b, "large transposed", a, LARGE, OT_TRANSPOSED);
    mark_last(b, false, true);
    if (with_specials) {
        one(b, "special values", a, TS_SHAPE(12), OT_CONTIG);
        mark_last(b, true, false);
    }
}

static void binary_samples(builder *b) {
    ot_args a = no_args;
    two(b, "contiguous", a, in_row(TS_SHAPE(5, 7), OT_CONTIG), in_row(TS_SHAPE(5, 7), OT_CONTIG));
    two(b, "transposed, sliced", a, in_row(TS_SHAPE(3, 4), OT_TRANSPOSED),
        in_row(TS_SHAPE(3, 4), OT_SLICED));
    two(b, "broadcast [3,1] [1,4]", a, in_row(TS_SHAPE(3, 1), OT_CONTIG),
        in_row(TS_SHAPE(1, 4), OT_CONTIG));
    two(b, "broadcast [2,3,4] [4]", a, in_row(TS_SHAPE(2, 3, 4), OT_CONTIG),
        in_row(TS_SHAPE(4), OT_CONTIG));
    two(b, "broadcast [4] [2,3,4] transposed", a, in_row(TS_SHAPE(4), OT_SLICED),
        in_row(TS_SHAPE(2, 3, 4), OT_TRANSPOSED));
    two(b, "expanded", a, in_row(TS_SHAPE(3, 4), OT_EXPANDED), in_row(TS_SHAPE(3, 4), OT_CONTIG));
    two(b, "empty", a, in_row(TS_SHAPE(0, 3), OT_CONTIG), in_row(TS_SHAPE(0, 3), OT_CONTIG));
    two(b, "empty broadcast", a, in_row(TS_SHAPE(0, 3), OT_CONTIG), in_row(TS_SHAPE(3), OT_CONTIG));
    two(b, "0-dim with [3,4]", a, in_row(TS_SHAPE(), OT_CONTIG), in_row(TS_SHAPE(3, 4), OT_CONTIG));
    two(b, "[3,4] with 0-dim", a, in_row(TS_SHAPE(3, 4), OT_TRANSPOSED),
        in_row(TS_SHAPE(), OT_CONTIG));
    two(b, "0-dim", a, in_row(TS_SHAPE(), OT_CONTIG), in_row(TS_SHAPE(), OT_CONTIG));
    two(b, "[3,4] with a cpu 0-dim", a, in_row(TS_SHAPE(3, 4), OT_CONTIG),
        in_row(TS_SHAPE(), OT_ON_CPU));
    two(b, "large", a, in_row(LARGE, OT_CONTIG), in_row(LARGE, OT_CONTIG));
    mark_last(b, false, true);
    two(b, "large broadcast, transposed", a, in_row(LARGE, OT_TRANSPOSED),
        in_row(TS_SHAPE(260), OT_CONTIG));
    mark_last(b, false, true);
    two(b, "special values", a, in_row(TS_SHAPE(12, 1), OT_CONTIG),
        in_row(TS_SHAPE(1, 12), OT_CONTIG));
    mark_last(b, true, false);
}

static void clamp_samples(builder *b, const ot_row *row) {
    static const double bounds[][2] = {{-1, 2}, {NAN, 1}, {0, NAN}, {1, -1}};
    for (int i = 0; i < 4; i++) {
        ot_args a = no_args;
        a.s = bounds[i][0], a.s2 = bounds[i][1];
        if (i == 0) {
            unary_layouts(b, a, row->specials);
        } else {
            one(b, "contiguous", a, TS_SHAPE(5, 7), OT_CONTIG);
            one(b, "sliced step 2", a, TS_SHAPE(3, 4), OT_SLICED);
        }
    }
}

static void where_samples(builder *b) {
    ot_args a = no_args;
    three(b, "contiguous", a, in_mask(TS_SHAPE(3, 4), OT_CONTIG), in_row(TS_SHAPE(3, 4), OT_CONTIG),
          in_row(TS_SHAPE(3, 4), OT_CONTIG));
    three(b, "broadcast", a, in_mask(TS_SHAPE(3, 1), OT_CONTIG), in_row(TS_SHAPE(1, 4), OT_CONTIG),
          in_row(TS_SHAPE(3, 4), OT_TRANSPOSED));
    three(b, "broadcast with 0-dim", a, in_mask(TS_SHAPE(4), OT_SLICED),
          in_row(TS_SHAPE(2, 3, 4), OT_TRANSPOSED), in_row(TS_SHAPE(), OT_CONTIG));
    three(b, "0-dim", a, in_mask(TS_SHAPE(), OT_CONTIG), in_row(TS_SHAPE(), OT_CONTIG),
          in_row(TS_SHAPE(), OT_CONTIG));
    three(b, "empty", a, in_mask(TS_SHAPE(0, 3), OT_CONTIG), in_row(TS_SHAPE(0, 3), OT_CONTIG),
          in_row(TS_SHAPE(3), OT_CONTIG));
    three(b, "large", a, in_mask(LARGE, OT_TRANSPOSED), in_row(LARGE, OT_CONTIG),
          in_row(TS_SHAPE(260), OT_CONTIG));
    mark_last(b, false, true);
}

static void masked_fill_samples(builder *b) {
    ot_args a = no_args;
    a.s = 1;
    two(b, "contiguous", a, in_row(TS_SHAPE(3, 4), OT_CONTIG), in_mask(TS_SHAPE(3, 4), OT_CONTIG));
    two(b, "transposed, broadcast mask", a, in_row(TS_SHAPE(3, 4), OT_TRANSPOSED),
        in_mask(TS_SHAPE(4), OT_CONTIG));
    two(b, "sliced, mask [3,1]", a, in_row(TS_SHAPE(2, 3, 4), OT_SLICED),
        in_mask(TS_SHAPE(3, 1), OT_CONTIG));
    two(b, "0-dim", a, in_row(TS_SHAPE(), OT_CONTIG), in_mask(TS_SHAPE(), OT_CONTIG));
    two(b, "empty", a, in_row(TS_SHAPE(0, 3), OT_CONTIG), in_mask(TS_SHAPE(0, 3), OT_CONTIG));
    two(b, "large", a, in_row(LARGE, OT_CONTIG), in_mask(LARGE, OT_TRANSPOSED));
    mark_last(b, false, true);
}

static ot_args red_args(ts_dims dims, bool keepdim, double corr) {
    ot_args a = no_args;
    a.dims = dims;
    a.dim = dims.n ? dims.d[0] : 0;
    a.keepdim = keepdim;
    a.s = corr;
    return a;
}

static void reduce_samples(builder *b, ot_samples kind) {
    const ts_dims all = {0};
    if (kind == OT_S_REDUCE_ALL) {
        unary_layouts(b, red_args(all, false, 1), false);
        return;
    }
    bool dim = kind == OT_S_REDUCE_DIM;
    ts_shape s3 = TS_SHAPE(3, 4, 5);
    one(b, "contiguous", red_args(TS_DIMS(0), false, 1), s3, OT_CONTIG);
    one(b, "contiguous keepdim", red_args(TS_DIMS(1), true, 1), s3, OT_CONTIG);
    one(b, "contiguous", red_args(TS_DIMS(-1), false, 0), s3, OT_CONTIG);
    one(b, "contiguous keepdim", red_args(TS_DIMS(2), true, 2), s3, OT_CONTIG);
    one(b, "transposed", red_args(TS_DIMS(1), false, 1), s3, OT_TRANSPOSED);
    one(b, "transposed", red_args(TS_DIMS(2), false, 1), s3, OT_TRANSPOSED);
    one(b, "sliced keepdim", red_args(TS_DIMS(2), true, 1), s3, OT_SLICED);
    one(b, "sliced", red_args(TS_DIMS(0), false, 1), s3, OT_SLICED);
    one(b, "expanded", red_args(TS_DIMS(0), false, 1), TS_SHAPE(3, 4), OT_EXPANDED);
    one(b, "0-dim", red_args(TS_DIMS(0), false, 1), TS_SHAPE(), OT_CONTIG);
    one(b, "0-dim keepdim", red_args(TS_DIMS(-1), true, 1), TS_SHAPE(), OT_CONTIG);
    one(b, "empty, reduce the non-empty dim", red_args(TS_DIMS(1), false, 1), TS_SHAPE(0, 3),
        OT_CONTIG);
    one(b, "empty, reduce the empty dim", red_args(TS_DIMS(0), true, 1), TS_SHAPE(0, 3), OT_CONTIG);
    one(b, "large", red_args(TS_DIMS(1), false, 1), LARGE, OT_CONTIG);
    mark_last(b, false, true);
    one(b, "large transposed keepdim", red_args(TS_DIMS(0), true, 1), LARGE, OT_TRANSPOSED);
    mark_last(b, false, true);
    if (dim) return;
    one(b, "dims (0, 2)", red_args(TS_DIMS(0, 2), false, 1), s3, OT_CONTIG);
    one(b, "dims (0, 2) keepdim", red_args(TS_DIMS(0, 2), true, 1), s3, OT_CONTIG);
    one(b, "dims (-1, 0)", red_args(TS_DIMS(-1, 0), false, 0), s3, OT_TRANSPOSED);
    one(b, "dims (1, 2) keepdim", red_args(TS_DIMS(1, 2), true, 1), s3, OT_SLICED);
    one(b, "dims () = all", red_args(all, false, 1), s3, OT_CONTIG);
    one(b, "dims () = all keepdim", red_args(all, true, 1), s3, OT_TRANSPOSED);
    one(b, "0-dim dims ()", red_args(all, false, 1), TS_SHAPE(), OT_CONTIG);
    one(b, "empty dims (0, 1)", red_args(TS_DIMS(0, 1), false, 1), TS_SHAPE(0, 3), OT_CONTIG);
    one(b, "large dims (0, 1)", red_args(TS_DIMS(0, 1), false, 1), LARGE, OT_SLICED);
    mark_last(b, false, true);
}

static void matmul_samples(builder *b, ot_samples kind) {
    ot_args a = no_args;
    if (kind == OT_S_MM) {
        two(b, "contiguous", a, in_row(TS_SHAPE(3, 4), OT_CONTIG),
            in_row(TS_SHAPE(4, 5), OT_CONTIG));
        two(b, "transposed", a, in_row(TS_SHAPE(3, 4), OT_TRANSPOSED),
            in_row(TS_SHAPE(4, 5), OT_TRANSPOSED));
        two(b, "sliced", a, in_row(TS_SHAPE(3, 4), OT_SLICED), in_row(TS_SHAPE(4, 5), OT_SLICED));
        two(b, "expanded", a, in_row(TS_SHAPE(3, 4), OT_EXPANDED),
            in_row(TS_SHAPE(4, 5), OT_CONTIG));
        two(b, "empty rows", a, in_row(TS_SHAPE(0, 4), OT_CONTIG),
            in_row(TS_SHAPE(4, 5), OT_CONTIG));
        two(b, "empty inner dim", a, in_row(TS_SHAPE(3, 0), OT_CONTIG),
            in_row(TS_SHAPE(0, 5), OT_CONTIG));
        two(b, "1x1", a, in_row(TS_SHAPE(1, 1), OT_CONTIG), in_row(TS_SHAPE(1, 1), OT_CONTIG));
        two(b, "larger", a, in_row(TS_SHAPE(33, 65), OT_CONTIG),
            in_row(TS_SHAPE(65, 17), OT_TRANSPOSED));
        mark_last(b, false, true);
    } else if (kind == OT_S_BMM) {
        two(b, "contiguous", a, in_row(TS_SHAPE(2, 3, 4), OT_CONTIG),
            in_row(TS_SHAPE(2, 4, 5), OT_CONTIG));
        two(b, "transposed", a, in_row(TS_SHAPE(2, 3, 4), OT_TRANSPOSED),
            in_row(TS_SHAPE(2, 4, 5), OT_TRANSPOSED));
        two(b, "sliced, expanded batch", a, in_row(TS_SHAPE(2, 3, 4), OT_SLICED),
            in_row(TS_SHAPE(2, 4, 5), OT_EXPANDED));
        two(b, "empty batch", a, in_row(TS_SHAPE(0, 3, 4), OT_CONTIG),
            in_row(TS_SHAPE(0, 4, 5), OT_CONTIG));
        two(b, "empty inner dim", a, in_row(TS_SHAPE(2, 3, 0), OT_CONTIG),
            in_row(TS_SHAPE(2, 0, 5), OT_CONTIG));
        two(b, "larger", a, in_row(TS_SHAPE(3, 17, 33), OT_CONTIG),
            in_row(TS_SHAPE(3, 33, 9), OT_TRANSPOSED));
        mark_last(b, false, true);
    } else {
        two(b, "1-d @ 1-d", a, in_row(TS_SHAPE(4), OT_CONTIG), in_row(TS_SHAPE(4), OT_SLICED));
        two(b, "2-d @ 1-d", a, in_row(TS_SHAPE(3, 4), OT_TRANSPOSED),
            in_row(TS_SHAPE(4), OT_CONTIG));
        two(b, "1-d @ 2-d", a, in_row(TS_SHAPE(4), OT_CONTIG), in_row(TS_SHAPE(4, 5), OT_CONTIG));
        two(b, "2-d @ 2-d", a, in_row(TS_SHAPE(3, 4), OT_CONTIG),
            in_row(TS_SHAPE(4, 5), OT_SLICED));
        two(b, "3-d @ 2-d", a, in_row(TS_SHAPE(2, 3, 4), OT_TRANSPOSED),
            in_row(TS_SHAPE(4, 5), OT_CONTIG));
        two(b, "2-d @ 3-d", a, in_row(TS_SHAPE(3, 4), OT_CONTIG),
            in_row(TS_SHAPE(2, 4, 5), OT_CONTIG));
        two(b, "batch broadcast [2,1,3,4] @ [3,4,5]", a, in_row(TS_SHAPE(2, 1, 3, 4), OT_CONTIG),
            in_row(TS_SHAPE(3, 4, 5), OT_TRANSPOSED));
        two(b, "1-d @ 3-d", a, in_row(TS_SHAPE(4), OT_CONTIG),
            in_row(TS_SHAPE(2, 4, 5), OT_CONTIG));
        two(b, "empty batch", a, in_row(TS_SHAPE(0, 3, 4), OT_CONTIG),
            in_row(TS_SHAPE(4, 5), OT_CONTIG));
    }
}

static void cat_stack_samples(builder *b, bool stack) {
    ot_args a = no_args;
    if (!stack) {
        a.dim = 0;
        two(b, "dim 0", a, in_row(TS_SHAPE(2, 3), OT_CONTIG), in_row(TS_SHAPE(4, 3), OT_CONTIG));
        a.dim = 1;
        two(b, "dim 1", a, in_row(TS_SHAPE(2, 3), OT_TRANSPOSED),
            in_row(TS_SHAPE(2, 5), OT_SLICED));
        a.dim = -1;
        two(b, "dim -1", a, in_row(TS_SHAPE(2, 3), OT_EXPANDED), in_row(TS_SHAPE(2, 1), OT_CONTIG));
        a.dim = 0;
        two(b, "with an empty tensor", a, in_row(TS_SHAPE(0, 3), OT_CONTIG),
            in_row(TS_SHAPE(2, 3), OT_CONTIG));
        three(b, "three, dim 0", a, in_row(TS_SHAPE(1, 4), OT_CONTIG),
              in_row(TS_SHAPE(2, 4), OT_SLICED), in_row(TS_SHAPE(3, 4), OT_TRANSPOSED));
        a.dim = 1;
        three(b, "three 3-d, dim 1", a, in_row(TS_SHAPE(2, 1, 4), OT_CONTIG),
              in_row(TS_SHAPE(2, 3, 4), OT_TRANSPOSED), in_row(TS_SHAPE(2, 2, 4), OT_CONTIG));
        a.dim = 0;
        two(b, "one input", a, in_row(TS_SHAPE(2, 3), OT_TRANSPOSED),
            in_row(TS_SHAPE(0, 3), OT_CONTIG));
        b->v[b->n - 1].n_in = 1, b->v[b->n - 1].args.n_in = 1;
        return;
    }
    static const int dims[] = {0, 1, 2, -1};
    for (int i = 0; i < 4; i++) {
        a.dim = dims[i];
        two(b, "two", a, in_row(TS_SHAPE(2, 3), i ? OT_TRANSPOSED : OT_CONTIG),
            in_row(TS_SHAPE(2, 3), OT_SLICED));
    }
    a.dim = 0;
    two(b, "0-dim", a, in_row(TS_SHAPE(), OT_CONTIG), in_row(TS_SHAPE(), OT_CONTIG));
    a.dim = 1;
    two(b, "empty", a, in_row(TS_SHAPE(0, 3), OT_CONTIG), in_row(TS_SHAPE(0, 3), OT_CONTIG));
    three(b, "three", a, in_row(TS_SHAPE(3, 4), OT_CONTIG), in_row(TS_SHAPE(3, 4), OT_EXPANDED),
          in_row(TS_SHAPE(3, 4), OT_TRANSPOSED));
}

static void index_samples(builder *b, ot_samples kind) {
    ot_args a = no_args;
    if (kind == OT_S_INDEX_SELECT) {
        a.dim = 0;
        two(b, "dim 0", a, in_row(TS_SHAPE(4, 5), OT_CONTIG), in_idx(TS_SHAPE(3), 4, OT_CONTIG));
        a.dim = 1;
        two(b, "dim 1, repeats", a, in_row(TS_SHAPE(4, 5), OT_TRANSPOSED),
            in_idx(TS_SHAPE(7), 5, OT_CONTIG));
        a.dim = -1;
        two(b, "dim -1, sliced index", a, in_row(TS_SHAPE(2, 3, 4), OT_SLICED),
            in_idx(TS_SHAPE(3), 4, OT_SLICED));
        a.dim = 0;
        two(b, "empty index", a, in_row(TS_SHAPE(4, 5), OT_CONTIG),
            in_idx(TS_SHAPE(0), 4, OT_CONTIG));
        a.dim = 1;
        two(b, "empty input", a, in_row(TS_SHAPE(0, 3), OT_CONTIG),
            in_idx(TS_SHAPE(2), 3, OT_CONTIG));
        a.dim = 1;
        two(b, "large", a, in_row(LARGE, OT_CONTIG), in_idx(TS_SHAPE(300), 260, OT_CONTIG));
        mark_last(b, false, true);
    } else if (kind == OT_S_GATHER) {
        a.dim = 0;
        two(b, "dim 0", a, in_row(TS_SHAPE(4, 5), OT_CONTIG), in_idx(TS_SHAPE(3, 5), 4, OT_CONTIG));
        a.dim = 1;
        two(b, "dim 1", a, in_row(TS_SHAPE(4, 5), OT_TRANSPOSED),
            in_idx(TS_SHAPE(4, 7), 5, OT_CONTIG));
        a.dim = -1;
        two(b, "index smaller than input", a, in_row(TS_SHAPE(4, 5), OT_SLICED),
            in_idx(TS_SHAPE(2, 3), 5, OT_TRANSPOSED));
        a.dim = 1;
        two(b, "3-d", a, in_row(TS_SHAPE(2, 3, 4), OT_CONTIG),
            in_idx(TS_SHAPE(2, 5, 4), 3, OT_CONTIG));
        a.dim = 0;
        two(b, "empty index", a, in_row(TS_SHAPE(4, 5), OT_CONTIG),
            in_idx(TS_SHAPE(0, 5), 4, OT_CONTIG));
    } else {
        a.dim = 0;
        three(b, "dim 0", a, in_row(TS_SHAPE(4, 5), OT_CONTIG),
              in_idx(TS_SHAPE(3, 5), 4, OT_CONTIG), in_row(TS_SHAPE(3, 5), OT_CONTIG));
        a.dim = 1;
        three(b, "dim 1, strided", a, in_row(TS_SHAPE(4, 5), OT_TRANSPOSED),
              in_idx(TS_SHAPE(4, 7), 5, OT_CONTIG), in_row(TS_SHAPE(4, 7), OT_SLICED));
        a.dim = -1;
        three(b, "index smaller than src", a, in_row(TS_SHAPE(4, 5), OT_CONTIG),
              in_idx(TS_SHAPE(2, 3), 5, OT_CONTIG), in_row(TS_SHAPE(3, 4), OT_CONTIG));
        a.dim = 0;
        three(b, "empty index", a, in_row(TS_SHAPE(4, 5), OT_CONTIG),
              in_idx(TS_SHAPE(0, 5), 4, OT_CONTIG), in_row(TS_SHAPE(0, 5), OT_CONTIG));
        a.dim = 0;
        /* few collisions per destination: low-precision accumulation order stays harmless */
        three(b, "large", a, in_row(LARGE, OT_CONTIG), in_idx(TS_SHAPE(20, 260), 130, OT_CONTIG),
              in_row(TS_SHAPE(20, 260), OT_TRANSPOSED));
        mark_last(b, false, true);
    }
}

static void softmax_samples(builder *b) {
    ot_args a = no_args;
    static const int dims[] = {0, 1, -1};
    for (int i = 0; i < 3; i++) {
        a.dim = dims[i];
        one(b, "contiguous", a, TS_SHAPE(3, 4, 5), OT_CONTIG);
        one(b, "transposed", a, TS_SHAPE(3, 4, 5), OT_TRANSPOSED);
    }
    a.dim = 1;
    one(b, "sliced", a, TS_SHAPE(3, 4), OT_SLICED);
    one(b, "expanded", a, TS_SHAPE(3, 4), OT_EXPANDED);
    a.dim = 0;
    one(b, "0-dim", a, TS_SHAPE(), OT_CONTIG);
    one(b, "empty", a, TS_SHAPE(0, 3), OT_CONTIG);
    a.dim = 1;
    one(b, "empty, other dim", a, TS_SHAPE(0, 3), OT_CONTIG);
    one(b, "large", a, LARGE, OT_CONTIG);
    mark_last(b, false, true);
    a.dim = 0;
    one(b, "large transposed", a, LARGE, OT_TRANSPOSED);
    mark_last(b, false, true);
}

static void one_hot_samples(builder *b) {
    ot_args a = no_args;
    a.n = -1;
    one(b, "inferred classes", a, TS_SHAPE(6), OT_CONTIG);
    one(b, "transposed", a, TS_SHAPE(2, 3), OT_TRANSPOSED);
    one(b, "0-dim", a, TS_SHAPE(), OT_CONTIG);
    one(b, "empty, inferred classes", a, TS_SHAPE(0), OT_CONTIG);
    a.n = 7;
    one(b, "7 classes", a, TS_SHAPE(6), OT_SLICED);
    one(b, "empty, 7 classes", a, TS_SHAPE(0, 2), OT_CONTIG);
}

int ot_make_samples(const ot_row *row, ot_sample *out, int max) {
    builder b = {out, 0, max};
    switch (row->samples) {
    case OT_S_UNARY:
        unary_layouts(&b, no_args, row->specials);
        break;
    case OT_S_BINARY:
        binary_samples(&b);
        break;
    case OT_S_SCALAR:
        for (int i = 0; i < row->nscalars; i++) {
            ot_args a = no_args;
            a.s = row->scalars[i];
            unary_layouts(&b, a, row->specials);
        }
        break;
    case OT_S_CLAMP:
        clamp_samples(&b, row);
        break;
    case OT_S_WHERE:
        where_samples(&b);
        break;
    case OT_S_MASKED_FILL:
        masked_fill_samples(&b);
        break;
    case OT_S_REDUCE_ALL:
    case OT_S_REDUCE_DIM:
    case OT_S_REDUCE_DIMS:
        reduce_samples(&b, row->samples);
        break;
    case OT_S_MM:
    case OT_S_BMM:
    case OT_S_MATMUL:
        matmul_samples(&b, row->samples);
        break;
    case OT_S_CAT:
        cat_stack_samples(&b, false);
        break;
    case OT_S_STACK:
        cat_stack_samples(&b, true);
        break;
    case OT_S_INDEX_SELECT:
    case OT_S_GATHER:
    case OT_S_SCATTER_ADD:
        index_samples(&b, row->samples);
        break;
    case OT_S_SOFTMAX:
        softmax_samples(&b);
        break;
    case OT_S_ONE_HOT:
        one_hot_samples(&b);
        break;
    }
    return b.n;
}

ts_shape ot_base_shape(const ot_in *in) {
    ts_shape s = in->shape;
    int nd = s.ndim;
    switch (in->layout) {
    case OT_TRANSPOSED:
        if (nd >= 2) {
            int64_t t = s.dims[nd - 1];
            s.dims[nd - 1] = s.dims[nd - 2];
            s.dims[nd - 2] = t;
        }
        break;
    case OT_SLICED:
        if (nd >= 1) s.dims[nd - 1] = 2 * s.dims[nd - 1] + 1;
        break;
    case OT_EXPANDED:
        if (nd >= 1) s.dims[0] = 1;
        break;
    default:
        break;
    }
    return s;
}
