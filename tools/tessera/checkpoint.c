/* checkpoint.c — the trainer's checkpoint folder (latest.safetensors, written atomically) and the
 * test hooks that kill the trainer at chosen points to prove resuming exact. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"

#define LATEST "latest.safetensors"

char *tcli_checkpoint_path(const char *dir) {
    size_t n = strlen(dir) + sizeof LATEST + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/" LATEST, dir);
    return p;
}

/* --fsdp: the sharded checkpoint's folder (DIR/sharded) and its manifest */
char *tcli_fsdp_checkpoint_dir(const char *dir) {
    size_t n = strlen(dir) + sizeof "/sharded";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/sharded", dir);
    return p;
}

char *tcli_fsdp_manifest_path(const char *dir) {
    size_t n = strlen(dir) + sizeof "/sharded/manifest.safetensors";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/sharded/manifest.safetensors", dir);
    return p;
}

static int mkdir_p(const char *dir) {
    char *p = strdup(dir);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
        *s = c;
        if (!c || err) break;
    }
    struct stat sb;
    if (!err && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) err = ENOTDIR;
    free(p);
    return err;
}

int tcli_checkpoint_prepare(const char *dir) {
    int err = mkdir_p(dir);
    if (err)
        return tcli_fail(TCLI_USAGE, "--checkpoint: cannot create '%s': %s", dir, strerror(err));
    /* a save cut short by a crash leaves its temporary (".latest.safetensors.tmp<pid>.<n>"): the
     * complete latest.safetensors beside it is what counts */
    DIR *d = opendir(dir);
    if (!d) return tcli_fail(TCLI_USAGE, "--checkpoint: '%s': %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "." LATEST ".tmp", sizeof LATEST + 4)) continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(n);
        if (path) {
            snprintf(path, n, "%s/%s", dir, e->d_name);
            remove(path);
            free(path);
        }
    }
    closedir(d);
    return -1;
}

static long env_long(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : 0;
}

/* TS_TRAIN_KILL_IN_SAVE=E: the save at the end of epoch E dies part-way through writing, by
 * SIGKILL, as a power cut would. A small file-size limit stops the temporary file's write
 * deterministically (SIGXFSZ), and the handler turns that into the SIGKILL. */
static void kill_now(int sig) {
    (void)sig;
    raise(SIGKILL);
}

ts_status tcli_checkpoint_save(const char *dir, const ts_checkpoint_parts *parts, int64_t epoch) {
    char *path = tcli_checkpoint_path(dir);
    if (!path) return TS_ERR_OOM;
    long kill_epoch = env_long("TS_TRAIN_KILL_IN_SAVE");
    if (kill_epoch > 0 && kill_epoch == epoch) {
        struct rlimit core = {0, 0}, fsize = {4096, RLIM_INFINITY};
        setrlimit(RLIMIT_CORE, &core);
        signal(SIGXFSZ, kill_now);
        fflush(stdout);
        setrlimit(RLIMIT_FSIZE, &fsize);
    }
    ts_status st = ts_checkpoint_save_parts(path, parts);
    free(path);
    return st;
}

/* TS_TRAIN_KILL_AFTER_BATCHES=N: SIGKILL right after the N-th training batch of this process. */
void tcli_test_hooks_batch(void) {
    static long left = -1;
    if (left < 0) left = env_long("TS_TRAIN_KILL_AFTER_BATCHES");
    if (left > 0 && --left == 0) {
        fflush(stdout);
        raise(SIGKILL);
    }
}
