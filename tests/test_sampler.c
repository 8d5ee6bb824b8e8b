/* test_sampler.c — ts_distributed_sampler against PyTorch's DistributedSampler rules, computed
 * here independently: every index once per epoch across replicas (or PyTorch's padding), each
 * replica's share of the loader's own permutation, set_epoch, drop_last, the loader fed by a
 * sampler (0 and 2 workers), and the errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* The loader's order of an epoch, read through a loader over a data set whose sample i is i. */
static ts_dataset *index_dataset(int64_t n) {
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = i;
    ts_tensor *x = ts_tensor_i64(TS_SHAPE(n, 1), v, (ts_opts){0});
    ts_tensor *y = ts_tensor_i64(TS_SHAPE(n), v, (ts_opts){0});
    free(v);
    ts_dataset *d = ts_tensor_dataset_new(x, y);
    ts_release(x);
    ts_release(y);
    return d;
}

/* what a loader delivers in one epoch, as sample indices (the y values); returns the count */
static int64_t loader_epoch(ts_dataset *d, ts_loader_opts o, int64_t epoch, int64_t *out) {
    ts_loader *l = ts_loader_new(d, o);
    if (!l) return -1;
    ts_loader_set_epoch(l, epoch);
    ts_batch b;
    int64_t k = 0;
    while (ts_loader_next(l, &b)) {
        int64_t m = ts_numel(b.y);
        ts_copy_to_host(b.y, out + k, (size_t)m * sizeof *out);
        k += m;
    }
    ts_loader_free(l);
    return k;
}

/* PyTorch's lists, from its code's rules: padded (or cut) list, then list[rank::W] */
static int64_t torch_share(const int64_t *order, int64_t n, int W, int r, bool drop_last,
                           int64_t *out) {
    int64_t num = drop_last && n % W ? (n - W + W - 1) / W : (n + W - 1) / W;
    if (num < 0) num = 0;
    int64_t total = num * W;
    int64_t *list = malloc((size_t)(total + n + 1) * sizeof *list), len = 0;
    if (drop_last) {
        for (int64_t i = 0; i < total; i++) list[len++] = order[i];
    } else {
        for (int64_t i = 0; i < n; i++) list[len++] = order[i];
        while (len < total) /* indices += (indices * ceil(pad / len))[:pad] */
            for (int64_t i = 0; i < n && len < total; i++) list[len++] = order[i];
    }
    int64_t k = 0;
    for (int64_t p = r; p < total; p += W) out[k++] = list[p];
    free(list);
    return k;
}

static void rules(int W, int64_t n, bool shuffle, bool drop_last) {
    ts_dataset *d = index_dataset(n);
    int64_t *order = malloc((size_t)(n + 1) * sizeof *order);
    int64_t *got = malloc((size_t)(n + W + 1) * sizeof *got);
    int64_t *want = malloc((size_t)(n + W + 1) * sizeof *want);
    int *seen = calloc((size_t)(n + 1), sizeof *seen);
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        if (shuffle)
            CHECK_EQ(loader_epoch(d, (ts_loader_opts){.shuffle = true, .seed = 11}, epoch, order),
                     n);
        else
            for (int64_t i = 0; i < n; i++) order[i] = i;
        memset(seen, 0, (size_t)(n + 1) * sizeof *seen);
        int64_t total = 0;
        for (int r = 0; r < W; r++) {
            ts_sampler *s = ts_distributed_sampler_new(
                n, (ts_distributed_sampler_opts){.num_replicas = W,
                                                 .rank = r,
                                                 .seed = 11,
                                                 .no_shuffle = !shuffle,
                                                 .drop_last = drop_last});
            CHECK(s != NULL);
            if (!s) continue;
            ts_sampler_set_epoch(s, epoch);
            int64_t len = ts_sampler_len(s);
            CHECK(ts_sampler_indices(s, got) == TS_OK);
            int64_t wl = torch_share(order, n, W, r, drop_last, want);
            CHECK_EQ(len, wl);
            bool same =
                len == wl && (len == 0 || memcmp(got, want, (size_t)len * sizeof *got) == 0);
            CHECK(same);
            if (!same)
                printf("W %d n %lld shuffle %d drop_last %d epoch %lld rank %d differs\n", W,
                       (long long)n, shuffle, drop_last, (long long)epoch, r);
            for (int64_t i = 0; i < len; i++)
                if (got[i] >= 0 && got[i] < n) seen[got[i]]++;
            total += len;
            /* the loader fed by the sampler delivers exactly its list, with 0 and 2 workers */
            for (int workers = 0; workers <= 2; workers += 2) {
                int64_t *lg = malloc((size_t)(len + 1) * sizeof *lg);
                int64_t k = loader_epoch(
                    d, (ts_loader_opts){.batch_size = 3, .sampler = s, .workers = workers}, epoch,
                    lg);
                CHECK_EQ(k, len);
                CHECK(k == len && (len == 0 || memcmp(lg, got, (size_t)len * sizeof *lg) == 0));
                free(lg);
            }
            ts_sampler_free(s);
        }
        /* every index once when W divides n (or drop_last cut the tail), at least once otherwise */
        bool exact = n % W == 0 || drop_last;
        int64_t missing = 0, extra = 0;
        for (int64_t i = 0; i < n; i++) {
            if (exact && i < total && seen[i] != 1) extra++;
            if (!drop_last && seen[i] < 1) missing++;
        }
        CHECK_EQ(missing, 0);
        if (n % W == 0 || !drop_last) CHECK_EQ(extra, 0);
        CHECK_EQ(total, drop_last ? (n / W) * W : ((n + W - 1) / W) * W);
    }
    free(order);
    free(got);
    free(want);
    free(seen);
    ts_dataset_free(d);
    CHECK_OK();
}

/* Hand-computed PyTorch lists (shuffle=False): n = 10, W = 4 pads with 0 and 1 ->
 * [0..9, 0, 1]; rank 1 takes 1, 5, 9; drop_last cuts to [0..7]: rank 3 takes 3, 7. n = 3, W = 5:
 * [0, 1, 2, 0, 1]: rank 4 takes 1 (the list repeated from its start). */
static void known_lists(void) {
    int64_t got[8];
    ts_sampler *s = ts_distributed_sampler_new(
        10, (ts_distributed_sampler_opts){.num_replicas = 4, .rank = 1, .no_shuffle = true});
    CHECK(ts_sampler_len(s) == 3 && ts_sampler_indices(s, got) == TS_OK);
    CHECK(got[0] == 1 && got[1] == 5 && got[2] == 9);
    ts_sampler_free(s);
    s = ts_distributed_sampler_new(
        10, (ts_distributed_sampler_opts){
                .num_replicas = 4, .rank = 3, .no_shuffle = true, .drop_last = true});
    CHECK(ts_sampler_len(s) == 2 && ts_sampler_indices(s, got) == TS_OK);
    CHECK(got[0] == 3 && got[1] == 7);
    ts_sampler_free(s);
    s = ts_distributed_sampler_new(
        3, (ts_distributed_sampler_opts){.num_replicas = 5, .rank = 4, .no_shuffle = true});
    CHECK(ts_sampler_len(s) == 1 && ts_sampler_indices(s, got) == TS_OK && got[0] == 1);
    ts_sampler_free(s);
    CHECK_OK();
}

static void epochs_differ(void) {
    int64_t a[50], b[50];
    ts_sampler *s = ts_distributed_sampler_new(
        100, (ts_distributed_sampler_opts){.num_replicas = 2, .rank = 0, .seed = 3});
    ts_sampler_set_epoch(s, 0);
    ts_sampler_indices(s, a);
    ts_sampler_set_epoch(s, 1);
    ts_sampler_indices(s, b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    ts_sampler_set_epoch(s, 0);
    ts_sampler_indices(s, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    ts_sampler_free(s);
    /* num_replicas 0: this process's world (one, outside a launcher) */
    s = ts_distributed_sampler_new(7, (ts_distributed_sampler_opts){0});
    CHECK(s && ts_sampler_len(s) == 7);
    ts_sampler_free(s);
    CHECK_OK();
}

static void errors(void) {
    CHECK(ts_distributed_sampler_new(
              10, (ts_distributed_sampler_opts){.num_replicas = 4, .rank = 4}) == NULL);
    CHECK(strstr(ts_error_message(), "Invalid rank 4, rank should be in the interval [0, 3]"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_distributed_sampler_new(10, (ts_distributed_sampler_opts){.num_replicas = -2}) ==
          NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_distributed_sampler_new(-1, (ts_distributed_sampler_opts){.num_replicas = 2}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sampler_len(NULL) == -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sampler_set_epoch(NULL, 1) == TS_ERR_ARG);
    ts_error_clear();
    ts_dataset *d = index_dataset(10);
    ts_sampler *s =
        ts_distributed_sampler_new(10, (ts_distributed_sampler_opts){.num_replicas = 2});
    CHECK(ts_loader_new(d, (ts_loader_opts){.sampler = s, .shuffle = true}) == NULL);
    CHECK(strstr(ts_error_message(), "sampler option is mutually exclusive with shuffle"));
    CHECK_ERR(TS_ERR_ARG);
    ts_sampler *other =
        ts_distributed_sampler_new(11, (ts_distributed_sampler_opts){.num_replicas = 2});
    CHECK(ts_loader_new(d, (ts_loader_opts){.sampler = other}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_sampler_free(s);
    ts_sampler_free(other);
    ts_dataset_free(d);
}

int main(void) {
    for (int W = 1; W <= 5; W++) {
        int64_t ns[] = {0, 1, W - 1, W, W + 1, 37, 100};
        for (int k = 0; k < 7; k++)
            for (int shuffle = 0; shuffle < 2; shuffle++)
                for (int drop = 0; drop < 2; drop++) rules(W, ns[k], shuffle, drop);
    }
    known_lists();
    epochs_differ();
    errors();
    return ts_test_finish();
}
