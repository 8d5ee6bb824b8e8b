/* shared_storage.c — cpu storages in shared memory (PyTorch's Tensor.share_memory_ and the
 * "file_descriptor" sharing strategy of torch.multiprocessing).
 *
 * ts_share_memory_ moves a cpu storage's bytes into an anonymous memfd (memfd_create, sealed
 * against shrinking) mapped MAP_SHARED, in place: the storage object stays, so every tensor and
 * view of it sees the shared memory from then on. Another process that receives the fd (fork,
 * SCM_RIGHTS, spawn's passed fds) maps the same pages with ts_from_shared_fd, whose geometry is
 * checked against the file's real size; the file can never shrink under a mapping (F_SEAL_SHRINK
 * is required), so no access through the tensor can run past it (no SIGBUS, no stray read).
 * Each storage owns its fd and mapping: the last reference unmaps and closes them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "tessera/storage.h"

typedef struct shared_map {
    void *map;
    size_t map_size; /* >= 1: a zero-byte storage still maps one byte */
    int fd;
} shared_map;

static void shared_release(void *ctx) {
    shared_map *m = ctx;
    munmap(m->map, m->map_size);
    close(m->fd);
    free(m);
}

static bool storage_is_shared(const ts_storage *s) { return s->release == shared_release; }

/* maps m->fd (owned by m) read-write and shared: m, or NULL + TS_ERR_OOM with m freed */
static shared_map *shared_map_map(const char *op, shared_map *m, size_t map_size) {
    m->map_size = map_size;
    m->map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (m->map != MAP_FAILED) return m;
    int e = errno;
    close(m->fd);
    free(m);
    return tsi_error_set(TS_ERR_OOM, "%s: cannot map %zu bytes of shared memory: %s", op, map_size,
                         strerror(e)),
           NULL;
}

/* a sealed memfd of map_size bytes mapped read-write and shared, or NULL + TS_ERR_OOM */
static shared_map *shared_map_new(const char *op, size_t map_size) {
    shared_map *m = malloc(sizeof *m);
    if (!m) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    m->fd = memfd_create("tessera-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (m->fd < 0) {
        int e = errno;
        free(m);
        return tsi_error_set(TS_ERR_OOM, "%s: memfd_create failed: %s", op, strerror(e)), NULL;
    }
    if (ftruncate(m->fd, (off_t)map_size) != 0 ||
        fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        int e = errno;
        close(m->fd);
        free(m);
        return tsi_error_set(TS_ERR_OOM, "%s: cannot size the shared memory to %zu bytes: %s", op,
                             map_size, strerror(e)),
               NULL;
    }
    return shared_map_map(op, m, map_size);
}

/* shared memory is an idea of the cpu here: cuda storages are a no-op for share_memory_
 * (PyTorch's documented behaviour) but cannot be exported (no CUDA IPC yet); sim devices live
 * inside one process and have no shared form */
static bool check_cpu(const char *op, ts_tensor *t) {
    ts_device d = t->storage->device;
    if (d.type == TS_CPU) return true;
    return tsi_error_set(TS_ERR_DEVICE,
                         "%s: only cpu tensors can live in shared memory, not one on %s%s", op,
                         ts_device_str(d),
                         d.type == TS_CUDA
                             ? " (cuda tensors would need CUDA IPC, which Tessera does not have)"
                             : " (a sim device exists only inside one Tessera process; move the "
                               "tensor to the cpu first)"),
           false;
}

ts_tensor *ts_share_memory_(ts_tensor *t) {
    static const char *op = "share_memory_";
    tsi_init();
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    ts_storage *s = t->storage;
    if (s->device.type == TS_CUDA) return t; /* PyTorch: a no-op for cuda tensors */
    if (!check_cpu(op, t)) return NULL;
    if (storage_is_shared(s)) return t;
    /* another framework (ts_to_dlpack, numpy()) holds the address of the memory: moving it would
     * leave that framework reading freed memory */
    if (atomic_load(&s->exported))
        return tsi_error_set(TS_ERR_STATE,
                             "%s: the storage's memory was handed to another framework (DLPack, "
                             "numpy()), which may still use it; share a clone instead",
                             op),
               NULL;
    if (s->capture_pool)
        return tsi_error_set(TS_ERR_STATE, "%s: the storage belongs to a captured graph", op), NULL;
    if (s->nbytes && !s->data)
        return tsi_error_set(TS_ERR_STATE, "%s: the storage's memory was freed (resharded)", op),
               NULL;
    shared_map *m = shared_map_new(op, s->nbytes ? s->nbytes : 1);
    if (!m) return NULL;
    if (s->nbytes) memcpy(m->map, s->data, s->nbytes);
    /* the old memory goes back to its owner: the allocator, or the external owner's release */
    if (s->release)
        s->release(s->release_ctx);
    else if (s->alloc && s->block)
        tsi_allocator_release(s->alloc, s->block);
    s->alloc = NULL;
    s->block = NULL;
    s->pinned = false;
    s->data = m->map;
    s->release = shared_release;
    s->release_ctx = m;
    /* another process may write it without a version bump: no cache may key on its version */
    atomic_store(&s->exported, true);
    return t;
}

bool ts_is_shared(ts_tensor *t) {
    if (!t) return false;
    if (t->storage->device.type == TS_CUDA) return true; /* PyTorch's answer for cuda storages */
    return storage_is_shared(t->storage);
}

ts_status ts_shared_fd(ts_tensor *t, int *fd, size_t *storage_nbytes, size_t *byte_offset) {
    static const char *op = "shared_fd";
    if (!tsi_check_input(op, t, "tensor")) return ts_error();
    if (!fd || !storage_nbytes || !byte_offset)
        return tsi_error_set(TS_ERR_ARG, "%s: an output pointer is NULL", op);
    if (!check_cpu(op, t)) return ts_error();
    if (!storage_is_shared(t->storage))
        return tsi_error_set(TS_ERR_STATE,
                             "%s: the tensor's storage is not in shared memory (call "
                             "ts_share_memory_ first)",
                             op);
    const shared_map *m = t->storage->release_ctx;
    *fd = m->fd;
    *storage_nbytes = t->storage->nbytes;
    *byte_offset = (size_t)t->offset * tsi_dtype_size(t->dtype);
    return TS_OK;
}

/* the bytes of storage the geometry reaches, from byte 0 (0 for no element); false on overflow */
static bool geometry_extent(ts_shape s, const int64_t *strides, int64_t offset, size_t es,
                            uint64_t *end) {
    *end = 0;
    if (tsi_numel(s) == 0) return true;
    int64_t last = offset;
    bool overflow = false;
    for (int i = 0; i < s.ndim; i++) {
        int64_t span;
        overflow |= __builtin_mul_overflow(s.dims[i] - 1, strides[i], &span);
        overflow |= __builtin_add_overflow(last, span, &last);
    }
    overflow |= __builtin_mul_overflow((uint64_t)last + 1, (uint64_t)es, end);
    return !overflow;
}

/* the geometry and the fd checked (each refusal with its own message) before anything is mapped */
ts_tensor *ts_from_shared_fd(int fd, size_t storage_nbytes, ts_dtype dtype, ts_shape shape,
                             const int64_t *strides, int64_t storage_offset) {
    static const char *op = "from_shared_fd";
    tsi_init();
    if (!tsi_check_shape(op, shape)) return NULL;
    if ((unsigned)dtype >= TS_DTYPE_COUNT || dtype == TS_DTYPE_DEFAULT)
        return tsi_error_set(TS_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype), NULL;
    if (!TSI_DTYPE_GATE(op, dtype, NULL)) return NULL;
    if (storage_offset < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: storage_offset %lld is negative", op,
                             (long long)storage_offset),
               NULL;
    int64_t st[TS_MAX_DIMS] = {0};
    tsi_contiguous_strides(&shape, st);
    for (int i = 0; i < shape.ndim && strides; i++) {
        if (strides[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: stride %lld of dim %d is negative", op,
                                 (long long)strides[i], i),
                   NULL;
        st[i] = strides[i];
    }
    size_t es = tsi_dtype_size(dtype);
    uint64_t end;
    if (!geometry_extent(shape, st, storage_offset, es, &end) || end > storage_nbytes)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: %s %s at storage offset %lld needs %llu bytes of storage; the "
                             "storage has %zu",
                             op, ts_dtype_name(dtype), tsi_shape_str(shape),
                             (long long)storage_offset, (unsigned long long)end, storage_nbytes),
               NULL;
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0)
        return tsi_error_set(TS_ERR_ARG, "%s: fd %d is not an open file", op, fd), NULL;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: fd %d is not shared memory sealed against shrinking (one made "
                             "by ts_share_memory_)",
                             op, fd),
               NULL;
    size_t map_size = storage_nbytes ? storage_nbytes : 1;
    if (sb.st_size < 0 || (uint64_t)sb.st_size < map_size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: the shared memory of fd %d holds %lld bytes; %zu were claimed",
                             op, fd, (long long)sb.st_size, storage_nbytes),
               NULL;
    shared_map *m = malloc(sizeof *m);
    if (!m) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    m->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (m->fd < 0) {
        int e = errno;
        free(m);
        return tsi_error_set(TS_ERR_OOM, "%s: cannot duplicate fd %d: %s", op, fd, strerror(e)),
               NULL;
    }
    if (!shared_map_map(op, m, map_size)) return NULL;
    ts_tensor *t = tsi_new_external(op, shape, dtype, ts_cpu(), m->map, storage_nbytes);
    if (!t) {
        shared_release(m);
        return NULL;
    }
    t->storage->release = shared_release; /* from here the storage owns the mapping */
    t->storage->release_ctx = m;
    atomic_store(&t->storage->exported, true);
    for (int i = 0; i < TS_MAX_DIMS; i++) t->strides[i] = i < shape.ndim ? st[i] : 0;
    t->offset = storage_offset;
    return tsi_own(t);
}
