/* dist_shared_dir.h — a scratch folder that every rank of a distributed test names alike. */
#ifndef TS_TEST_DIST_SHARED_DIR_H
#define TS_TEST_DIST_SHARED_DIR_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tessera.h"

/* "<prefix><rank 0's pid>" in out (n bytes), made by rank 0 before every rank goes on. */
static inline void shared_dir(const char *prefix, char *out, size_t n) {
    int64_t pid = (int64_t)getpid();
    ts_tensor *t = ts_tensor_i64(TS_SHAPE(), &pid, (ts_opts){0});
    ts_dist_broadcast(t, 0, NULL);
    ts_copy_to_host(t, &pid, sizeof pid);
    ts_release(t);
    snprintf(out, n, "%s%lld", prefix, (long long)pid);
    if (ts_dist_rank() == 0) mkdir(out, 0777);
    ts_dist_barrier();
}

#endif /* TS_TEST_DIST_SHARED_DIR_H */
