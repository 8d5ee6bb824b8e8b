/* env_config.c — the environment, read once into fixed buffers (env_config.h has the table).
 * No allocation: the snapshot is taken inside start-up, before TS_FAULT_ALLOC's counter is set,
 * and must not count as (or fail as) one of the library's allocations. */
#define _POSIX_C_SOURCE 200809L
#include "backend/env_config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VALUE_MAX = 1024 }; /* a value as long or longer is refused (a path of 1 KiB) */

static const char *const names[TSI_ENV_COUNT] = {
#define TSI_ENV_NAME(id, name, doc) name,
    TSI_ENV_TABLE(TSI_ENV_NAME)
#undef TSI_ENV_NAME
};

static char values[TSI_ENV_COUNT][VALUE_MAX];
static bool present[TSI_ENV_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_one(int i) {
    const char *v = getenv(names[i]);
    present[i] = false;
    if (!v || !*v) return;
    size_t n = strlen(v);
    if (n >= VALUE_MAX) {
        fprintf(stderr, "tessera: %s is %zu characters long (at most %d); ignored\n", names[i], n,
                VALUE_MAX - 1);
        return;
    }
    memcpy(values[i], v, n + 1);
    present[i] = true;
}

static void load(void) {
    for (int i = 0; i < TSI_ENV_COUNT; i++) load_one(i);
}

static bool valid(tsi_env_id id) { return (int)id >= 0 && id < TSI_ENV_COUNT; }

const char *tsi_env(tsi_env_id id) {
    pthread_once(&once, load);
    return valid(id) && present[id] ? values[id] : NULL;
}

bool tsi_env_on(tsi_env_id id) {
    const char *v = tsi_env(id);
    return v && strcmp(v, "0") != 0;
}

bool tsi_env_is(tsi_env_id id, const char *s) {
    const char *v = tsi_env(id);
    return v && s && strcmp(v, s) == 0;
}

long tsi_env_long(tsi_env_id id, long fallback) {
    const char *v = tsi_env(id);
    if (!v) return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || end == v ? fallback : x;
}

const char *tsi_env_name(tsi_env_id id) { return valid(id) ? names[id] : "?"; }

void tsi_env_reload(tsi_env_id id) {
    pthread_once(&once, load);
    if (valid(id))
        load_one(id);
    else if (id == TSI_ENV_COUNT)
        load();
}
