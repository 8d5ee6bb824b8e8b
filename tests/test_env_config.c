/* test_env_config.c — the environment snapshot (src/backend/env_config.c): values read once and
 * kept when the environment changes, re-read by tsi_env_reload (one variable or all), the parsed
 * forms (on, is, long), names, ids outside the table, an over-long value refused. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "ts_test.h"

static void set(const char *name, const char *v) {
    if (v)
        setenv(name, v, 1);
    else
        unsetenv(name);
}

/* TS_DDP_OVERLAP and TS_DIST_TIMEOUT: variables no code of this program acts on */
static void snapshot_and_reload(void) {
    set("TS_DDP_OVERLAP", "1");
    set("TS_DIST_TIMEOUT", "12");
    tsi_env_reload(TSI_ENV_COUNT); /* every variable */
    CHECK(tsi_env(TSI_ENV_DDP_OVERLAP) && !strcmp(tsi_env(TSI_ENV_DDP_OVERLAP), "1"));
    CHECK_EQ(tsi_env_long(TSI_ENV_DIST_TIMEOUT, -7), 12);
    /* the environment changes: the snapshot does not */
    set("TS_DDP_OVERLAP", "0");
    set("TS_DIST_TIMEOUT", NULL);
    CHECK(tsi_env_is(TSI_ENV_DDP_OVERLAP, "1"));
    CHECK_EQ(tsi_env_long(TSI_ENV_DIST_TIMEOUT, -7), 12);
    /* one variable re-read, the other kept */
    tsi_env_reload(TSI_ENV_DDP_OVERLAP);
    CHECK(tsi_env_is(TSI_ENV_DDP_OVERLAP, "0"));
    CHECK_EQ(tsi_env_long(TSI_ENV_DIST_TIMEOUT, -7), 12);
    tsi_env_reload(TSI_ENV_DIST_TIMEOUT);
    CHECK(tsi_env(TSI_ENV_DIST_TIMEOUT) == NULL);
    CHECK_EQ(tsi_env_long(TSI_ENV_DIST_TIMEOUT, -7), -7);
    /* an empty value counts as unset */
    set("TS_DIST_TIMEOUT", "");
    tsi_env_reload(TSI_ENV_DIST_TIMEOUT);
    CHECK(tsi_env(TSI_ENV_DIST_TIMEOUT) == NULL);
}

static void parsed_forms(void) {
    static const struct {
        const char *v;
        bool on;
        long num; /* tsi_env_long with fallback -7 */
    } cases[] = {{"0", false, 0},   {"1", true, 1},    {"00", true, 0},   {"-1", true, -1},
                 {"off", true, -7}, {"12x", true, -7}, {" 5", true, 5},   {"+3", true, 3},
                 {"/", true, -7},   {"!", true, -7},   {NULL, false, -7}, {"", false, -7}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        set("TS_DDP_OVERLAP", cases[i].v);
        tsi_env_reload(TSI_ENV_DDP_OVERLAP);
        const bool on = tsi_env_on(TSI_ENV_DDP_OVERLAP);
        const long num = tsi_env_long(TSI_ENV_DDP_OVERLAP, -7);
        if (on != cases[i].on || num != cases[i].num)
            printf("  TS_DDP_OVERLAP=%s: on %d, long %ld\n", cases[i].v ? cases[i].v : "(unset)",
                   on, num);
        CHECK(on == cases[i].on);
        CHECK_EQ(num, cases[i].num);
    }
    set("TS_DDP_OVERLAP", "keep");
    tsi_env_reload(TSI_ENV_DDP_OVERLAP);
    CHECK(tsi_env_is(TSI_ENV_DDP_OVERLAP, "keep"));
    CHECK(!tsi_env_is(TSI_ENV_DDP_OVERLAP, "kee"));
    CHECK(!tsi_env_is(TSI_ENV_DDP_OVERLAP, "keep2"));
    CHECK(!tsi_env_is(TSI_ENV_DDP_OVERLAP, NULL));
    set("TS_DDP_OVERLAP", NULL);
    tsi_env_reload(TSI_ENV_DDP_OVERLAP);
    CHECK(!tsi_env_is(TSI_ENV_DDP_OVERLAP, "keep"));
}

static void names_and_ids(void) {
    CHECK(!strcmp(tsi_env_name(TSI_ENV_SIM_DEVICES), "TS_SIM_DEVICES")); /* the first */
    CHECK(!strcmp(tsi_env_name(TSI_ENV_GEMM), "TS_GEMM"));
    CHECK(!strcmp(tsi_env_name(TSI_ENV_MPI_LOCALNRANKS), "MPI_LOCALNRANKS")); /* the last */
    CHECK(!strcmp(tsi_env_name(TSI_ENV_COUNT), "?"));
    CHECK(!strcmp(tsi_env_name((tsi_env_id)-1), "?"));
    CHECK(tsi_env(TSI_ENV_COUNT) == NULL);
    CHECK(tsi_env((tsi_env_id)-1) == NULL);
    CHECK(!tsi_env_on(TSI_ENV_COUNT));
    CHECK_EQ(tsi_env_long((tsi_env_id)-1, 4), 4);
    tsi_env_reload((tsi_env_id)-1); /* nothing happens */
    tsi_env_reload((tsi_env_id)(TSI_ENV_COUNT + 1));
    /* the first and the last entries are read like the others */
    set("MPI_LOCALNRANKS", "3");
    tsi_env_reload(TSI_ENV_COUNT);
    CHECK_EQ(tsi_env_long(TSI_ENV_MPI_LOCALNRANKS, 0), 3);
    set("MPI_LOCALNRANKS", NULL);
    tsi_env_reload(TSI_ENV_MPI_LOCALNRANKS);
    CHECK(tsi_env(TSI_ENV_MPI_LOCALNRANKS) == NULL);
}

/* a value of 1023 characters is kept whole, one of 1024 is refused (unset) */
static void long_values(void) {
    char v[1025];
    memset(v, 'a', sizeof v);
    v[1023] = '\0';
    set("TS_OOM_SNAPSHOT", v);
    tsi_env_reload(TSI_ENV_OOM_SNAPSHOT);
    const char *got = tsi_env(TSI_ENV_OOM_SNAPSHOT);
    CHECK(got && strlen(got) == 1023 && got[1022] == 'a');
    v[1023] = 'a';
    v[1024] = '\0';
    set("TS_OOM_SNAPSHOT", v);
    tsi_env_reload(TSI_ENV_OOM_SNAPSHOT);
    CHECK(tsi_env(TSI_ENV_OOM_SNAPSHOT) == NULL);
    set("TS_OOM_SNAPSHOT", NULL);
    tsi_env_reload(TSI_ENV_OOM_SNAPSHOT);
}

int main(void) {
    snapshot_and_reload();
    parsed_forms();
    names_and_ids();
    long_values();
    return ts_test_finish();
}
