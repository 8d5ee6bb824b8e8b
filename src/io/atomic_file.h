/* atomic_file.h — whole-file writes that either replace the target completely or leave it as it
 * was. */
#ifndef TS_IO_ATOMIC_FILE_H
#define TS_IO_ATOMIC_FILE_H

#include <stddef.h>

#include "tessera.h"

/* A temporary file next to the target: written, fsync'ed, then renamed over the target and the
 * folder fsync'ed, so a crash or an error at any point leaves either the old file or the new one.
 */
typedef struct tsi_afile {
    int fd;
    const char *op;   /* error prefix */
    const char *path; /* the target (borrowed) */
    char *tmp;        /* the temporary file's path (malloc'ed) */
} tsi_afile;

/* Creates the temporary file; TS_ERR_IO "<op>: cannot create a temporary file for '<path>': ..."
 * (strerror). On failure nothing is left to clean up. */
ts_status tsi_afile_open(tsi_afile *f, const char *op, const char *path);
/* Writes all n bytes (retrying short writes); TS_ERR_IO with strerror. */
ts_status tsi_afile_write(tsi_afile *f, const void *data, size_t n);
/* fsync, close, rename over the target, fsync of the folder. On failure the temporary file is
 * removed and the target is untouched. The handle is finished either way. */
ts_status tsi_afile_commit(tsi_afile *f);
/* Closes and removes the temporary file (after an error); the target is untouched. */
void tsi_afile_abort(tsi_afile *f);

/* mkdir -p: each missing component of dir is created; one that exists must be a folder.
 * TS_ERR_IO "<op>: cannot create folder '<dir>': ..." (strerror; naming the component that
 * failed when it is not dir itself), TS_ERR_OOM. */
ts_status tsi_make_dirs(const char *op, const char *dir);

#endif /* TS_IO_ATOMIC_FILE_H */
