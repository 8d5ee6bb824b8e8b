/* bench_loader.c — the data loader alone: batches/s and samples/s with 0, 1 and 2 workers over a
 * synthetic in-memory Fashion-MNIST (60,000 u8 [28, 28, 1] images), to_tensor + normalize, batch
 * 64, shuffled. Prints "loader_w<N> <batches_per_s> <samples_per_s>" lines.
 * Usage: bench_loader [quick] (quick: one epoch per setting instead of the best of three) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

static double now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "bench_loader: %s: %s\n", what, ts_error_message());
    exit(1);
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    enum { N = 60000, HW = 28 * 28, BATCH = 64 };
    uint8_t *px = malloc((size_t)N * HW);
    int64_t *lab = malloc(N * sizeof *lab);
    if (!px || !lab) return 1;
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; i < (size_t)N * HW; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        px[i] = (uint8_t)s;
    }
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    ts_tensor *x = ts_from_data(TS_SHAPE(N, 28, 28, 1), TS_U8, px, (ts_opts){.dtype = TS_U8});
    ts_tensor *y = ts_tensor_i64(TS_SHAPE(N), lab, (ts_opts){0});
    ts_dataset *d = ts_tensor_dataset_new(x, y);
    if (!d) die("dataset");
    const int reps = quick ? 1 : 3;
    for (int workers = 0; workers <= 2; workers++) {
        ts_transform *tf[2] = {ts_to_tensor_new(), ts_normalize_new(1, (const float[]){0.2860f},
                                                                    (const float[]){0.3530f})};
        ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = BATCH,
                                                         .shuffle = true,
                                                         .workers = workers,
                                                         .seed = 1,
                                                         .transform = ts_compose_new(2, tf)});
        if (!l) die("loader");
        double best = 1e30;
        int64_t batches = 0, samples = 0;
        for (int r = 0; r < reps; r++) {
            ts_batch b;
            batches = samples = 0;
            double t0 = now();
            while (ts_loader_next(l, &b)) {
                batches++;
                samples += ts_size(b.x, 0);
            }
            double dt = now() - t0;
            if (ts_error()) die("epoch");
            best = dt < best ? dt : best;
        }
        printf("loader_w%d %.1f %.0f\n", workers, (double)batches / best, (double)samples / best);
        fflush(stdout);
        ts_loader_free(l);
    }
    ts_dataset_free(d);
    ts_release(x);
    ts_release(y);
    free(px);
    free(lab);
    return 0;
}
