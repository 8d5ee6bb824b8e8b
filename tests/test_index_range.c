/* test_index_range.c — an index tensor's values read once (core/index_range.c): cross entropy's
 * labels on sim:0 are copied to the host once per step, not by the loss, the gather and the
 * backward's scatter each, and not at all in a second step with the same labels; and the record
 * never lets a changed or different index through unchecked: an in-place write, a check against a
 * smaller size, a view of other elements, an ignore_index that is a class, memory handed to
 * another framework. */
#include <math.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "core/internal.h"
#include "tessera.h"
#include "tessera/dlpack.h"
#include "tessera/profiler.h"
#include "ts_test.h"

static ts_device sim0(void) { return ts_sim(0); }

static void start(void) { CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){0}), TS_OK); }

/* device-to-host copies recorded since start() */
static int64_t read_bytes; /* of the last reads() */
static int reads(void) {
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    size_t n = 0;
    const ts_profile_event *ev = p ? ts_profile_events(p, &n) : NULL;
    int k = 0;
    read_bytes = 0;
    for (size_t i = 0; ev && i < n; i++)
        if (ev[i].kind == TS_PROF_TRANSFER && ev[i].transfer == TS_XFER_D2H) {
            k++;
            read_bytes += ev[i].bytes;
        }
    ts_profile_free(p);
    return k;
}

static ts_tensor *labels(const int64_t *v, int64_t n, ts_device dev) {
    return ts_tensor_i64(TS_SHAPE(n), v, (ts_opts){.device = dev});
}

/* mean cross entropy of logits [n, c] (row-major) against targets, in double */
static double ce_ref(const float *x, const int64_t *t, int n, int c, int64_t ignore) {
    double s = 0;
    int counted = 0;
    for (int i = 0; i < n; i++) {
        if (t[i] == ignore) continue;
        double m = x[i * c], z = 0;
        for (int j = 1; j < c; j++) m = x[i * c + j] > m ? x[i * c + j] : m;
        for (int j = 0; j < c; j++) z += exp((double)x[i * c + j] - m);
        s += m + log(z) - x[i * c + t[i]];
        counted++;
    }
    return s / counted;
}

static void training_step_reads_labels_once(void) {
    ts_scope_begin();
    enum { N = 6, C = 5 };
    float xv[N * C];
    for (int i = 0; i < N * C; i++) xv[i] = (float)((i * 7 % 11) - 5) / 4.0f;
    const int64_t tv[N] = {0, 4, 2, 2, 1, 3};
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(N, C), xv, (ts_opts){.device = sim0()});
    ts_set_requires_grad(x, true);
    ts_tensor *t = labels(tv, N, sim0());
    CHECK_OK();
    for (int step = 0; step < 2; step++) {
        start();
        ts_tensor *loss = ts_cross_entropy(x, t);
        CHECK_EQ(ts_backward(loss), TS_OK);
        /* the loss, the gather of its log-probabilities, the scatter of the gather's backward */
        CHECK_EQ(reads(), step == 0 ? 1 : 0);
        CHECK_NEAR(ts_item(loss), ce_ref(xv, tv, N, C, -100), 1e-5);
    }
    /* labels written in place (a version bump): read again, and a bad one refused */
    start();
    ts_fill_(ts_narrow(t, 0, 2, 1), 3);
    ts_cross_entropy(x, t);
    CHECK_EQ(reads(), 1);
    CHECK_OK();
    ts_fill_(ts_narrow(t, 0, 5, 1), 7);
    CHECK(ts_cross_entropy(x, t) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    CHECK(ts_gather(x, 1, ts_unsqueeze(t, 1)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    ts_scope_end();
}

static void views_and_sizes(void) {
    ts_scope_begin();
    const int64_t v[4] = {0, 1, 2, 7};
    ts_tensor *i = labels(v, 4, sim0());
    ts_tensor *src8 = ts_zeros(TS_SHAPE(8), (ts_opts){.device = sim0()});
    ts_tensor *src5 = ts_zeros(TS_SHAPE(5), (ts_opts){.device = sim0()});
    CHECK_OK();
    /* checked against 8; an unsqueezed view of the same elements needs no read */
    start();
    CHECK(ts_index_select(src8, 0, i) != NULL);
    CHECK(ts_gather(ts_unsqueeze(src8, 1), 0, ts_unsqueeze(i, 1)) != NULL);
    CHECK_EQ(reads(), 1);
    /* a smaller size is read and refused: 7 >= 5 */
    CHECK(ts_index_select(src5, 0, i) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    /* the first three checked against 5; the whole tensor (with the 7) is another set */
    ts_tensor *head = ts_narrow(i, 0, 0, 3);
    start();
    CHECK(ts_index_select(src5, 0, head) != NULL);
    CHECK(ts_index_select(src5, 0, head) != NULL);
    CHECK_EQ(reads(), 1);
    CHECK(ts_index_select(src5, 0, i) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    /* the same elements through as_strided with other strides: [0, 2] is not [0, 1, 2] */
    ts_tensor *odd = ts_as_strided(i, TS_SHAPE(2), (int64_t[]){3}, 0); /* 0 and 7 */
    CHECK(ts_index_select(src5, 0, odd) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    ts_scope_end();
}

/* An embedding's forward and backward: the tokens read once (the lookup's check; the [4, 8] ids
 * and their [32] reshape are the same elements), the backward's scatter of an expanded index
 * reads nothing; positions made by arange are never read; an expanded index not seen before
 * reads its distinct elements only. */
static void embedding_and_broadcast_indices(void) {
    ts_scope_begin();
    const ts_opts o = {.device = sim0()};
    ts_tensor *w = ts_randn(TS_SHAPE(10, 6), o), *wp = ts_randn(TS_SHAPE(8, 6), o);
    ts_set_requires_grad(w, true);
    ts_set_requires_grad(wp, true);
    int64_t tv[32];
    for (int i = 0; i < 32; i++) tv[i] = (i * 7) % 10;
    ts_tensor *tok = ts_tensor_i64(TS_SHAPE(4, 8), tv, o);
    CHECK_OK();
    start();
    ts_tensor *pos = ts_arange(0, 8, 1, o);
    ts_tensor *h = ts_add(ts_embedding(w, tok), ts_embedding(wp, pos));
    CHECK_EQ(ts_backward(ts_sum(ts_mul(h, h))), TS_OK);
    CHECK_EQ(reads(), 1);
    /* the gradients are the cpu's (where every check reads in place) */
    ts_tensor *wc = ts_to(ts_detach(w), ts_cpu()), *wpc = ts_to(ts_detach(wp), ts_cpu());
    ts_set_requires_grad(wc, true);
    ts_set_requires_grad(wpc, true);
    ts_tensor *hc = ts_add(ts_embedding(wc, ts_to(tok, ts_cpu())),
                           ts_embedding(wpc, ts_arange(0, 8, 1, (ts_opts){0})));
    CHECK_EQ(ts_backward(ts_sum(ts_mul(hc, hc))), TS_OK);
    for (int k = 0; k < 2; k++) {
        ts_tensor *g = ts_grad(k ? wp : w), *gc = ts_grad(k ? wpc : wc);
        CHECK(g && gc);
        if (g && gc) CHECK(ts_item(ts_max(ts_abs(ts_sub(ts_to(g, ts_cpu()), gc)))) == 0);
    }
    /* positions that start below zero are read, and refused */
    start();
    CHECK(ts_embedding(wp, ts_arange(-1, 7, 1, o)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    CHECK_EQ(reads(), 1);
    /* a fresh index expanded to [4, 5]: 4 values read (32 bytes), not 20 */
    const int64_t iv[4] = {0, 1, 2, 3};
    ts_tensor *wide =
        ts_expand(ts_reshape(ts_tensor_i64(TS_SHAPE(4), iv, o), TS_SHAPE(4, 1)), TS_SHAPE(4, 5));
    ts_tensor *src = ts_ones(TS_SHAPE(4, 5), o);
    start();
    CHECK(ts_scatter_add(ts_zeros(TS_SHAPE(4, 5), o), 0, wide, src) != NULL);
    CHECK_EQ(reads(), 1);
    CHECK_EQ(read_bytes, 32);
    /* and one out of range in it is caught */
    const int64_t bad[4] = {0, 1, 9, 3};
    wide =
        ts_expand(ts_reshape(ts_tensor_i64(TS_SHAPE(4), bad, o), TS_SHAPE(4, 1)), TS_SHAPE(4, 5));
    CHECK(ts_scatter_add(ts_zeros(TS_SHAPE(4, 5), o), 0, wide, src) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    ts_scope_end();
}

/* The canonical form merges a dim into the one before it only where it continues it, and keeps
 * every dim: a [2, 2, 2] view of 8 ids is not its first 4 (checked before), so an id out of range
 * among the last 4 is caught; a [2, 3, 2] and a [6, 2] view of the same 12 of 24 ids (every
 * other pair: the two outer dims of the first merge into one) are one set, read once. */
static void merged_dims(void) {
    ts_scope_begin();
    const ts_opts o = {.device = sim0()};
    ts_tensor *w = ts_randn(TS_SHAPE(8, 3), o);
    const int64_t v8[8] = {0, 1, 2, 3, 4, 5, 6, 9};
    ts_tensor *i8 = labels(v8, 8, sim0());
    CHECK(ts_embedding(w, ts_narrow(i8, 0, 0, 4)) != NULL);
    CHECK(ts_embedding(w, ts_reshape(i8, TS_SHAPE(2, 2, 2))) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    int64_t v24[24];
    for (int k = 0; k < 24; k++) v24[k] = k % 4 < 2 ? k % 8 : 100; /* the pairs kept are < 8 */
    ts_tensor *i24 = labels(v24, 24, sim0());
    ts_tensor *a = ts_narrow(ts_reshape(i24, TS_SHAPE(2, 3, 4)), 2, 0, 2); /* strides 12, 4, 1 */
    ts_tensor *b = ts_narrow(ts_reshape(i24, TS_SHAPE(6, 4)), 1, 0, 2);    /* strides 4, 1 */
    CHECK_OK();
    start();
    CHECK(ts_gather(ts_zeros(TS_SHAPE(8, 3, 2), o), 0, a) != NULL);
    CHECK(ts_gather(ts_zeros(TS_SHAPE(8, 2), o), 0, b) != NULL);
    CHECK_EQ(reads(), 1);
    /* the whole of it is another set: its 100s are caught */
    CHECK(ts_gather(ts_zeros(TS_SHAPE(8, 4), o), 0, ts_reshape(i24, TS_SHAPE(6, 4))) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of bounds");
    ts_scope_end();
}

/* nll_loss with an ignore_index that is a valid class must count the ignored targets even when
 * the targets were checked before */
static void ignore_index_inside_the_classes(void) {
    ts_scope_begin();
    enum { N = 4, C = 3 };
    float xv[N * C];
    for (int k = 0; k < N * C; k++) xv[k] = (float)(k % 5) - 2.0f;
    const int64_t tv[N] = {0, 1, 2, 1};
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(N, C), xv, (ts_opts){.device = sim0()});
    ts_tensor *t = labels(tv, N, sim0());
    CHECK(ts_gather(x, 1, ts_unsqueeze(t, 1)) != NULL); /* notes [0, 3) */
    ts_tensor *loss =
        ts_cross_entropy_ex(x, t, (ts_loss_opts){.has_ignore_index = true, .ignore_index = 1});
    CHECK_OK();
    CHECK_NEAR(ts_item(loss), ce_ref(xv, tv, N, C, 1), 1e-5);
    ts_scope_end();
}

/* memory handed to another framework may change without a version bump: never recorded */
static void exported_memory_is_always_read(void) {
    ts_scope_begin();
    const int64_t v[3] = {0, 1, 2};
    ts_tensor *i = labels(v, 3, ts_cpu());
    ts_tensor *src = ts_zeros(TS_SHAPE(3), (ts_opts){0});
    CHECK(ts_index_select(src, 0, i) != NULL);
    CHECK(tsi_index_range_known(i, 3));
    CHECK(!tsi_index_range_known(i, 2));
    struct DLManagedTensor *m = ts_to_dlpack(i);
    CHECK(m != NULL);
    CHECK(!tsi_index_range_known(i, 3));
    CHECK(ts_index_select(src, 0, i) != NULL);
    CHECK(!tsi_index_range_known(i, 3));
    if (m && m->deleter) m->deleter(m);
    ts_scope_end();
}

int main(void) {
    training_step_reads_labels_once();
    views_and_sizes();
    embedding_and_broadcast_indices();
    ignore_index_inside_the_classes();
    merged_dims();
    exported_memory_is_always_read();
    return ts_test_finish();
}
