/* test_dist_fsdp_errors.c — what FSDP's errors name, whole (a world of one, and by ctest under
 * mpiexec with 2 and 4 ranks):
 *  - a backward that left units waiting: the next forward lists every unit still waiting, each
 *    with the gradients it got of its parameters ('<root>' for the root unit), and none that
 *    finished;
 *  - a sharded checkpoint's shard file missing, or one from another generation in its place: the
 *    message names the file and the rank, world and generation it should belong to; on the ranks
 *    that did not fail it is "rank R failed: " and the failing rank's message; a manifest that is
 *    not FSDP's (another format, a world of 0, no generation) is named as such;
 *  - a save that fails on the last rank alone: the other ranks name that rank and its file;
 *  - a save whose manifest is renamed into place but whose folder sync then fails (fsync and
 *    rename are wrapped below): the error is reported, and the shards that manifest names and the
 *    previous generation's all stay, so the checkpoint on disk loads. */
#define _GNU_SOURCE /* syscall */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dist_shared_dir.h"
#include "ts_test.h"

static int rank, world;

/* The process's fsync and rename (the library's calls resolve to these): with fail_manifest_sync
 * set, the fsync of a folder right after a rename onto a manifest fails with EIO. */
static int fail_manifest_sync, renamed_manifest;

int rename(const char *from, const char *to) {
    renamed_manifest = strstr(to, "manifest.safetensors") != NULL;
    return renameat(AT_FDCWD, from, AT_FDCWD, to);
}

int fsync(int fd) {
    struct stat sb;
    if (fail_manifest_sync && renamed_manifest && fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

typedef struct three_fc {
    ts_module base;
    ts_module *fc1, *fc2, *fc3;
} three_fc;

static ts_tensor *three_fc_forward(ts_module *self, ts_tensor *x) {
    three_fc *m = (three_fc *)self;
    return ts_forward(m->fc3, ts_tanh(ts_forward(m->fc2, ts_tanh(ts_forward(m->fc1, x)))));
}

static ts_module *three_fc_new(void) {
    ts_manual_seed(7);
    three_fc *m = ts_module_alloc(sizeof *m, "ThreeFC", three_fc_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(4, 6));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(6, 6));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(6, 4));
    return &m->base;
}

/* fc1 stays in the root unit; fc2 and fc3 are units of their own */
static const char *const UNITS[] = {"fc2", "fc3"};

static ts_module *fsdp_new(int stage) {
    return ts_fsdp_new(three_fc_new(),
                       (ts_fsdp_opts){.stage = stage, .units = UNITS, .n_units = 2});
}

/* ------------------------------------------------------------------ units left waiting */
static void waiting(void) {
    ts_module *f = fsdp_new(3);
    three_fc *in = (three_fc *)ts_fsdp_module(f);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 4), (ts_opts){0});
    /* a backward through fc2 alone: its unit finishes, the root and fc3 wait */
    ts_backward(ts_sum(ts_forward(in->fc2, ts_randn(TS_SHAPE(2, 6), (ts_opts){0}))));
    CHECK_OK();
    CHECK(ts_forward(f, x) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "units still waiting (parameters with a gradient of all): "
                                "'<root>' (0 of 2), 'fc3' (0 of 2). Every parameter");
    CHECK(ts_forward(f, x) != NULL); /* the next try starts afresh */
    CHECK_OK();
    ts_scope_end();
    ts_module_free(f);

    /* stage 2 (the gathered parameters stay): a gradient for fc3's weight alone, no unit finished;
     * the three units wait, fc3 with one of its two */
    f = fsdp_new(2);
    in = (three_fc *)ts_fsdp_module(f);
    ts_scope_begin();
    ts_backward(ts_sum(ts_module_get(in->fc3, "weight")));
    CHECK_OK();
    CHECK(ts_forward(f, ts_randn(TS_SHAPE(2, 4), (ts_opts){0})) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "of all): '<root>' (0 of 2), 'fc2' (0 of 2), 'fc3' (1 of 2). ");
    ts_scope_end();
    ts_module_free(f);
    CHECK_OK();
}

/* ------------------------------------------------------------------ checkpoint messages */
static char *join(const char *dir, const char *name) {
    static char buf[8][1024]; /* a few live at once */
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%.400s/%.300s", dir, name);
    return p;
}

static char *shard(const char *dir, int gen, int r) {
    char name[128];
    snprintf(name, sizeof name, "shard.%d.%d-of-%d.safetensors", gen, r, world);
    return join(dir, name);
}

/* the pending error is code with the message want on the failing rank, and "<op>: rank R
 * failed: " then want on the others; cleared */
static void check_named(ts_status code, int failing, const char *op, const char *want) {
    char full[1200];
    if (rank == failing)
        snprintf(full, sizeof full, "%s", want);
    else
        snprintf(full, sizeof full, "%s: rank %d failed: %s", op, failing, want);
    CHECK_EQ(ts_error(), code);
    CHECK_STREQ(ts_error_message(), full);
    ts_error_clear();
}

static void checkpoint_messages(void) {
    char dir[256], want[1200];
    shared_dir("/tmp/ts_fsdp_err_", dir, sizeof dir);
    const int last = world - 1;
    ts_module *f = fsdp_new(3);
    CHECK(ts_fsdp_save_sharded(f, dir, NULL) == TS_OK); /* generation 1 */
    const char *old = join(dir, "old"), *held = join(dir, "held");
    if (rank == 0) { /* the last rank's shard of generation 1, kept aside */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", shard(dir, 1, last), old);
        CHECK(system(cmd) == 0);
    }
    CHECK(ts_fsdp_save_sharded(f, dir, NULL) == TS_OK); /* generation 2 */
    CHECK_OK();

    /* the last rank's shard missing */
    const char *lastp = shard(dir, 2, last);
    if (rank == 0) CHECK(rename(lastp, held) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_load_sharded(f, dir, NULL) != TS_OK);
    snprintf(want, sizeof want,
             "fsdp_load_sharded: %s (rank %d's shard of the world of %d that saved the "
             "checkpoint) is missing: No such file or directory",
             lastp, last, world);
    check_named(TS_ERR_IO, last, "fsdp_load_sharded", want);

    /* generation 1's shard in its place */
    ts_dist_barrier();
    if (rank == 0) CHECK(rename(old, lastp) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_load_sharded(f, dir, NULL) != TS_OK);
    snprintf(want, sizeof want,
             "fsdp_load_sharded: %s: not rank %d's shard of generation 2 of a world of %d (its "
             "metadata says generation 1, world %d, rank %d)",
             lastp, last, world, world, last);
    check_named(TS_ERR_FORMAT, last, "fsdp_load_sharded", want);
    ts_dist_barrier();
    if (rank == 0) CHECK(rename(held, lastp) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_load_sharded(f, dir, NULL) == TS_OK);
    CHECK_OK();

    /* a manifest that is not FSDP's: another format, a world of 0, no generation */
    const char *man = join(dir, "manifest.safetensors"), *kept = join(dir, "manifest.kept");
    char ws[16];
    snprintf(ws, sizeof ws, "%d", world);
    const char *bad[3][6] = {{"format", "other", "generation", "2", "world", ws},
                             {"format", "tessera-fsdp", "generation", "2", "world", "0"},
                             {"format", "tessera-fsdp", "world", ws, "stage", "3"}};
    if (rank == 0) CHECK(rename(man, kept) == 0);
    for (int k = 0; k < 3; k++) {
        ts_tensor_list none = {0};
        if (rank == 0) CHECK(ts_safetensors_save(man, &none, bad[k], 3) == TS_OK);
        ts_dist_barrier();
        CHECK(ts_fsdp_load_sharded(f, dir, NULL) != TS_OK);
        snprintf(want, sizeof want,
                 "fsdp_load_sharded: %s is not a sharded checkpoint's manifest (format "
                 "tessera-fsdp, generation, world) ",
                 man);
        CHECK_EQ(ts_error(), TS_ERR_FORMAT);
        CHECK_STREQ(ts_error_message(), want); /* no reader's error to add */
        ts_error_clear();
        ts_dist_barrier();
    }
    if (rank == 0) CHECK(rename(kept, man) == 0);
    ts_dist_barrier();

    /* a save that fails on the last rank alone (its file's name is taken by a folder): the others
     * name it, and its message names the file */
    const char *next = shard(dir, 3, last);
    if (rank == 0) CHECK(mkdir(next, 0777) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_save_sharded(f, dir, NULL) != TS_OK);
    snprintf(want, sizeof want, "fsdp_save_sharded: rank %d failed: ", last);
    if (rank != last) CHECK(strncmp(ts_error_message(), want, strlen(want)) == 0);
    CHECK(strstr(ts_error_message(), next) != NULL);
    if (!strstr(ts_error_message(), next)) printf("rank %d: %s\n", rank, ts_error_message());
    ts_error_clear();
    ts_dist_barrier();
    if (rank == 0) CHECK(rmdir(next) == 0);

    /* generation 3's manifest renamed into place, then its folder's sync fails on rank 0 */
    fail_manifest_sync = rank == 0;
    CHECK(ts_fsdp_save_sharded(f, dir, NULL) != TS_OK);
    fail_manifest_sync = 0;
    CHECK_EQ(ts_error(), TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "syncing folder") != NULL);
    snprintf(want, sizeof want, "fsdp_save_sharded: rank 0 failed: ");
    if (rank != 0) CHECK(strncmp(ts_error_message(), want, strlen(want)) == 0);
    ts_error_clear();
    ts_dist_barrier();
    struct stat sb;
    CHECK(stat(shard(dir, 3, rank), &sb) == 0); /* named by the manifest: kept */
    CHECK(stat(shard(dir, 2, rank), &sb) == 0); /* the old manifest may come back: kept */
    CHECK(ts_fsdp_load_sharded(f, dir, NULL) == TS_OK);
    CHECK(ts_fsdp_save_sharded(f, dir, NULL) == TS_OK); /* generation 4 removes 2 and 3 */
    ts_dist_barrier();
    CHECK(stat(shard(dir, 2, rank), &sb) != 0 && stat(shard(dir, 3, rank), &sb) != 0);
    CHECK_OK();

    ts_module_free(f);
    ts_dist_barrier();
    if (rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    ts_dist_barrier();
    CHECK_OK();
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    waiting();
    checkpoint_messages();
    ts_dist_finalize();
    return ts_test_finish();
}
