/* atomic_file.c — temporary file + fsync + rename + folder fsync, so a target is never half
 * written. */
#define _POSIX_C_SOURCE 200809L
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

/* Folder part of path ("." when there is none), malloc'ed. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/x" lives in "/" */
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

ts_status tsi_afile_open(tsi_afile *f, const char *op, const char *path) {
    static atomic_uint_fast64_t counter;
    f->fd = -1;
    f->op = op;
    f->path = path;
    f->tmp = NULL;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return tsi_error_set(TS_ERR_IO, "%s: '%s' names a folder, not a file", op, path);
    size_t dir_len = (size_t)(base - path);
    /* A long name plus the suffix could pass NAME_MAX; the temporary's name does not matter. */
    const char *stem = strlen(base) > 200 ? "tessera" : base;
    size_t cap = dir_len + strlen(stem) + 64;
    f->tmp = malloc(cap);
    if (!f->tmp) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int err = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t k = atomic_fetch_add(&counter, 1);
        uint64_t r = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL) ^ (k * 0xBF58476D1CE4E5B9ULL);
        snprintf(f->tmp, cap, "%.*s.%s.tmp%ld.%06llx", (int)dir_len, path, stem, (long)getpid(),
                 (unsigned long long)(r >> 40));
        /* 0666 so the umask applies as for any new file (mkstemp would force 0600) */
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) return TS_OK;
        err = errno;
        if (err != EEXIST) break;
    }
    tsi_error_set(TS_ERR_IO, "%s: cannot create a temporary file next to '%s': %s", op, path,
                  strerror(err));
    free(f->tmp);
    f->tmp = NULL;
    return TS_ERR_IO;
}

ts_status tsi_afile_write(tsi_afile *f, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(f->fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return tsi_error_set(TS_ERR_IO, "%s: writing '%s' failed: %s", f->op, f->path,
                                 strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return TS_OK;
}

void tsi_afile_abort(tsi_afile *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
}

/* The rename is durable only once the folder's entry is on disk too. */
static ts_status fsync_dir(const tsi_afile *f, const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ts_status st = TS_OK;
    /* some file systems cannot sync a folder (EINVAL); the data itself is already synced */
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL && errno != EROFS))
        st = tsi_error_set(TS_ERR_IO, "%s: syncing folder '%s' of '%s' failed: %s", f->op, dir,
                           f->path, strerror(errno));
    if (fd >= 0) close(fd);
    return st;
}

ts_status tsi_afile_commit(tsi_afile *f) {
    /* the folder's name before the rename: once the new file is in place, nothing may fail for
     * want of memory (a caller told of a failure would take the file for absent) */
    char *dir = dir_of(f->path);
    if (!dir) {
        tsi_error_set(TS_ERR_OOM, "%s: out of memory", f->op);
        tsi_afile_abort(f);
        return TS_ERR_OOM;
    }
    const char *what = NULL;
    if (fsync(f->fd) != 0) what = "syncing";
    int saved = errno;
    if (close(f->fd) != 0 && !what) {
        what = "closing";
        saved = errno;
    }
    f->fd = -1;
    if (!what && rename(f->tmp, f->path) != 0) {
        what = "renaming the temporary file onto";
        saved = errno;
    }
    if (what) {
        tsi_error_set(TS_ERR_IO, "%s: %s '%s' failed: %s", f->op, what, f->path, strerror(saved));
        tsi_afile_abort(f);
        free(dir);
        return TS_ERR_IO;
    }
    free(f->tmp);
    f->tmp = NULL;
    ts_status st = fsync_dir(f, dir);
    free(dir);
    return st;
}

/* ------------------------------------------------------------------ folders */
ts_status tsi_make_dirs(const char *op, const char *dir) {
    char *p = strdup(dir);
    if (!p) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    ts_status st = TS_OK;
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != '\0') continue;
        if (s[-1] != '/') { /* "a//b" has an empty component */
            *s = '\0';
            if (mkdir(p, 0777) != 0) {
                int err = errno;
                struct stat sb;
                /* EEXIST, but also EACCES or EROFS on some systems when the folder is there */
                bool is_dir = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
                if (!is_dir) {
                    if (err == EEXIST) err = ENOTDIR;
                    st = strcmp(p, dir) == 0
                             ? tsi_error_set(TS_ERR_IO, "%s: cannot create folder '%s': %s", op,
                                             dir, strerror(err))
                             : tsi_error_set(TS_ERR_IO,
                                             "%s: cannot create folder '%s' (for '%s'): %s", op, p,
                                             dir, strerror(err));
                    break;
                }
            }
            *s = c;
        }
        if (!c) break;
    }
    free(p);
    return st;
}
