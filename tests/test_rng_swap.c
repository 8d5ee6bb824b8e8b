/* test_rng_swap.c — ts_rng_thread_swap, the thread stream a generator object of its own runs on
 * (tessera.Generator): swapped in, it draws what the global generator draws from the same
 * (seed, offset), leaves the global one where it was, hands back where it stopped, and nests. */
#include <string.h>

#include "ts_test.h"

static void values(ts_tensor *t, float *out, int n) {
    CHECK(t != NULL && ts_numel(t) == n);
    if (t) ts_copy_to_host(t, out, sizeof(float) * (size_t)n);
}

int main(void) {
    enum { N = 8 };
    float global_a[N], global_b[N], own_a[N], own_b[N], after[N];
    ts_scope_begin();
    /* the reference: the global generator from seed 7, two draws */
    ts_manual_seed(7);
    values(ts_randn(TS_SHAPE(N), (ts_opts){0}), global_a, N);
    values(ts_rand(TS_SHAPE(N), (ts_opts){0}), global_b, N);
    const ts_rng_state ref_end = ts_rng_get_state();

    /* the global generator at seed 99; a stream at (7, 0) swapped in draws the same numbers */
    ts_manual_seed(99);
    const ts_rng_state global_before = ts_rng_get_state();
    bool on = true;
    ts_rng_state s = {7, 0};
    ts_rng_thread_swap(&on, &s);
    CHECK(!on); /* the thread had no stream of its own */
    values(ts_randn(TS_SHAPE(N), (ts_opts){0}), own_a, N);
    /* nested: a second generator swapped in and out leaves the first's position alone */
    bool on2 = true;
    ts_rng_state s2 = {1234, 8};
    ts_rng_thread_swap(&on2, &s2);
    CHECK(on2 && s2.seed == 7 && s2.offset == ref_end.offset / 2);
    ts_tensor *other = ts_rand(TS_SHAPE(3), (ts_opts){0});
    CHECK(other != NULL);
    ts_rng_thread_swap(&on2, &s2); /* back to the first */
    CHECK(on2 && s2.seed == 1234 && s2.offset > 8);
    values(ts_rand(TS_SHAPE(N), (ts_opts){0}), own_b, N);
    ts_rng_thread_swap(&on, &s); /* back to the global generator */
    CHECK(on && s.seed == 7 && s.offset == ref_end.offset);
    CHECK(!memcmp(own_a, global_a, sizeof own_a) && !memcmp(own_b, global_b, sizeof own_b));
    /* the global generator was not touched */
    const ts_rng_state global_after = ts_rng_get_state();
    CHECK(global_after.seed == global_before.seed && global_after.offset == global_before.offset);
    ts_manual_seed(99);
    float fresh[N];
    values(ts_randn(TS_SHAPE(N), (ts_opts){0}), after, N);
    ts_manual_seed(99);
    values(ts_randn(TS_SHAPE(N), (ts_opts){0}), fresh, N);
    CHECK(!memcmp(after, fresh, sizeof after));
    /* off swapped with off stays off */
    on = false;
    s = (ts_rng_state){0, 0};
    ts_rng_thread_swap(&on, &s);
    CHECK(!on);
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
