/* bench_rss.h — the process's resident set, for the benchmarks' memory columns: the kernel's
 * /proc/self/status counters and the reset of its high-water mark (Linux). */
#ifndef TS_BENCH_RSS_H
#define TS_BENCH_RSS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kB of a /proc/self/status line ("VmRSS:", "VmHWM:"); -1 when it cannot be read */
static inline long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* The high-water mark (VmHWM) starts again from the current resident set; returns that (kB). */
static inline long rss_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    return status_kb("VmRSS:");
}

#endif /* TS_BENCH_RSS_H */
