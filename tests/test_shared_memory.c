/* test_shared_memory.c — tessera/storage.h's shared memory (ts_share_memory_, ts_is_shared,
 * ts_shared_fd, ts_from_shared_fd): a storage moved into shared memory keeps its values and its
 * views; a fork()ed child's writes reach the parent (and not for a tensor left private); a tensor
 * rebuilt from the fd sees the same pages; lying sizes, geometries past the storage and fds that
 * are not sealed shared memory are refused; sim is refused, cuda would be a no-op; no fd, mapping,
 * tensor or byte is left behind. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlpack/dlpack.h>

#include "tessera/storage.h"
#include "ts_test.h"

static double at(ts_tensor *t, int64_t i) { return ts_item(ts_select(t, 0, i)); }

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int count_maps(void) { /* mappings of Tessera's memfds */
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) n += strstr(line, "memfd:tessera-shared") != NULL;
    fclose(f);
    return n;
}

static void test_share_and_views(void) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32};
    int maps0 = count_maps();
    ts_tensor *a = ts_arange(0, 6, 1, o);
    ts_tensor *v = ts_narrow(a, 0, 2, 3); /* made before sharing: shares the storage object */
    CHECK(!ts_is_shared(a) && !ts_is_shared(v));
    CHECK(ts_share_memory_(v) == v); /* a view moves the whole storage */
    CHECK(ts_is_shared(a) && ts_is_shared(v));
    CHECK_EQ(count_maps(), maps0 + 1);
    for (int i = 0; i < 6; i++) CHECK(at(a, i) == i); /* the bytes came along */
    CHECK(ts_share_memory_(a) == a);                  /* already shared: no new mapping */
    CHECK_EQ(count_maps(), maps0 + 1);
    CHECK(ts_fill_(v, 9.0) == v); /* a write through the view reaches the base */
    CHECK(at(a, 1) == 1 && at(a, 2) == 9 && at(a, 4) == 9 && at(a, 5) == 5);
    ts_tensor *w = ts_narrow(a, 0, 0, 2); /* a view made after sharing is shared too */
    CHECK(ts_is_shared(w));
    ts_tensor *c = ts_add_scalar(a, 1.0); /* results of ops are ordinary memory */
    CHECK(c && !ts_is_shared(c));
    ts_tensor *e = ts_zeros(TS_SHAPE(0), o); /* an empty tensor shares too */
    CHECK(ts_share_memory_(e) == e && ts_is_shared(e) && ts_numel(e) == 0);
    ts_tensor *z = ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_C64}); /* bytes: any dtype */
    CHECK(ts_share_memory_(z) == z && ts_is_shared(z));
    CHECK(ts_item(ts_sum(ts_view_as_real(z))) == 3.0);
    ts_scope_end();
}

static void test_fork(void) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F64};
    ts_tensor *shared = ts_zeros(TS_SHAPE(4), o);
    ts_tensor *private = ts_zeros(TS_SHAPE(4), o);
    CHECK(ts_share_memory_(shared) == shared);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* the child writes both, then leaves without running exit handlers */
        bool ok = ts_fill_(ts_narrow(shared, 0, 1, 2), 42.0) && ts_fill_(private, 7.0);
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(at(shared, 0) == 0 && at(shared, 1) == 42 && at(shared, 2) == 42 && at(shared, 3) == 0);
    CHECK(at(private, 0) == 0 && at(private, 3) == 0); /* copy-on-write: the parent's stays */
    ts_scope_end();
}

/* share_memory_ when it cannot get its memory: out of host memory for its bookkeeping (the first
 * allocation fails), and no file descriptor left for the memfd (a child whose RLIMIT_NOFILE is
 * used up): TS_ERR_OOM naming the cause, and the tensor stays private with its values */
static void test_share_failures(void) {
    ts_scope_begin();
    ts_tensor *t = ts_arange(0, 4, 1, (ts_opts){.dtype = TS_F64});
    ts_fault_alloc_set(1);
    ts_tensor *r = ts_share_memory_(t);
    const bool fired = ts_fault_alloc_fired();
    ts_fault_alloc_set(-1);
    CHECK(fired && r == NULL);
    CHECK_ERR_HAS(TS_ERR_OOM, "share_memory_: out of host memory");
    CHECK(!ts_is_shared(t) && at(t, 3) == 3);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* every descriptor below the lowest free one is taken: none is left */
        const int next = open("/dev/null", O_RDONLY);
        struct rlimit rl;
        bool ok = next >= 0 && close(next) == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0;
        rl.rlim_cur = (rlim_t)next;
        ok = ok && setrlimit(RLIMIT_NOFILE, &rl) == 0 && ts_share_memory_(t) == NULL &&
             ts_error() == TS_ERR_OOM &&
             strstr(ts_error_message(), "share_memory_: memfd_create failed") != NULL &&
             !ts_is_shared(t) && at(t, 3) == 3;
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(!ts_is_shared(t));
    ts_scope_end();
}

static void test_from_fd(void) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32};
    int fds0 = count_fds(), maps0 = count_maps();
    ts_tensor *a = ts_arange(0, 6, 1, o);
    ts_tensor *v = ts_narrow(a, 0, 2, 3);
    int fd = -1;
    size_t nbytes = 0, off = 0;
    CHECK(ts_shared_fd(v, &fd, &nbytes, &off) == TS_ERR_STATE); /* not shared yet */
    ts_error_clear();
    CHECK(ts_share_memory_(a) == a);
    CHECK_OK();
    CHECK(ts_shared_fd(v, &fd, &nbytes, &off) == TS_OK);
    CHECK(fd >= 0 && nbytes == 24 && off == 8);
    CHECK_EQ(count_fds(), fds0 + 1);

    /* the same pages: contiguous from v's offset, and strided */
    ts_tensor *r = ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(3), NULL, (int64_t)off / 4);
    CHECK(r && ts_is_shared(r) && ts_storage_offset(r) == 2);
    CHECK(at(r, 0) == 2 && at(r, 2) == 4);
    CHECK(ts_fill_(r, -1.0) == r);
    CHECK(at(a, 1) == 1 && at(a, 2) == -1 && at(a, 4) == -1 && at(a, 5) == 5);
    const int64_t st2[] = {2};
    ts_tensor *s =
        ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(3), st2, 1); /* a[1], a[3], a[5] */
    CHECK(s && at(s, 0) == 1 && at(s, 1) == -1 && at(s, 2) == 5);
    ts_tensor *b = ts_from_shared_fd(fd, nbytes, TS_U8, TS_SHAPE(24), NULL, 0); /* the bytes */
    CHECK(b && ts_numel(b) == 24);
    CHECK_EQ(count_fds(), fds0 + 4); /* each rebuilt storage holds its own duplicate */
    CHECK_EQ(count_maps(), maps0 + 4);
    /* exported again from a rebuilt tensor: the same memory */
    int fd2 = -1;
    CHECK(ts_shared_fd(s, &fd2, &nbytes, &off) == TS_OK && fd2 != fd && off == 4);

    /* refusals: nothing mapped, no fd kept */
    CHECK(!ts_from_shared_fd(fd, nbytes + 4, TS_F32, TS_SHAPE(1), NULL, 0)); /* a lying size */
    CHECK_ERR_HAS(TS_ERR_ARG, "holds 24 bytes; 28 were claimed");
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(3), NULL, 4)); /* past the storage */
    CHECK_ERR_HAS(TS_ERR_ARG, "needs 28 bytes of storage; the storage has 24");
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(4), st2, 0)); /* strided past it */
    CHECK_ERR_HAS(TS_ERR_ARG, "needs 28 bytes");
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F64, TS_SHAPE(4), NULL, 0)); /* a wider dtype */
    CHECK_ERR(TS_ERR_ARG);
    const int64_t huge[] = {INT64_MAX / 2};
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(3), huge, 0)); /* overflow */
    CHECK_ERR(TS_ERR_ARG);
    const int64_t neg[] = {-1};
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(3), neg, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "negative");
    CHECK(!ts_from_shared_fd(fd, nbytes, TS_F32, TS_SHAPE(1), NULL, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "negative");
    CHECK(!ts_from_shared_fd(-1, nbytes, TS_F32, TS_SHAPE(1), NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "not an open file");
    CHECK(!ts_from_shared_fd(fd, nbytes, (ts_dtype)99, TS_SHAPE(1), NULL, 0));
    CHECK_ERR(TS_ERR_DTYPE);
    int unsealed = memfd_create("not-sealed", MFD_CLOEXEC); /* could shrink under a mapping */
    CHECK(unsealed >= 0 && ftruncate(unsealed, 64) == 0);
    CHECK(!ts_from_shared_fd(unsealed, 16, TS_F32, TS_SHAPE(4), NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "sealed");
    close(unsealed);
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    CHECK(!ts_from_shared_fd(pipefd[0], 0, TS_F32, TS_SHAPE(0), NULL, 0));
    CHECK_ERR(TS_ERR_ARG);
    close(pipefd[0]), close(pipefd[1]);
    CHECK_EQ(count_fds(), fds0 + 4);
    CHECK_EQ(count_maps(), maps0 + 4);
    ts_scope_end(); /* every storage's last reference: unmapped and closed */
    CHECK_EQ(count_fds(), fds0);
    CHECK_EQ(count_maps(), maps0);
}

static void test_devices(void) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(3), (ts_opts){.device = ts_sim(0)});
    CHECK(!ts_share_memory_(x));
    CHECK_ERR_HAS(TS_ERR_DEVICE, "sim:0 (a sim device exists only inside one Tessera process");
    CHECK(!ts_is_shared(x));
    int fd;
    size_t nb, off;
    CHECK(ts_shared_fd(x, &fd, &nb, &off) == TS_ERR_DEVICE);
    ts_error_clear();
    CHECK(!ts_share_memory_(NULL));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_is_shared(NULL));
    ts_tensor *c = ts_zeros(TS_SHAPE(1), (ts_opts){0});
    CHECK(ts_share_memory_(c) && ts_shared_fd(c, NULL, &nb, &off) == TS_ERR_ARG);
    ts_error_clear();
    /* memory another framework holds the address of stays where it is */
    ts_tensor *e = ts_ones(TS_SHAPE(2), (ts_opts){0});
    DLManagedTensor *m = ts_to_dlpack(e);
    CHECK(m != NULL);
    CHECK(!ts_share_memory_(e));
    CHECK_ERR_HAS(TS_ERR_STATE, "another framework");
    CHECK(!ts_is_shared(e));
    if (m) m->deleter(m);
    /* imported memory: copied into shared memory, the producer's deleter called then */
    ts_tensor *src = ts_arange(0, 3, 1, (ts_opts){0});
    ts_tensor *imp = ts_from_dlpack(ts_to_dlpack(src));
    CHECK(imp && ts_share_memory_(imp) == imp && ts_is_shared(imp) && !ts_is_shared(src));
    CHECK(ts_fill_(imp, 5.0) && at(src, 2) == 2 && at(imp, 2) == 5);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(2, 0);
    ts_mem_stats before, after;
    ts_memory_stats(ts_cpu(), &before);
    int fds0 = count_fds(), maps0 = count_maps();
    test_share_and_views();
    test_fork();
    test_share_failures();
    test_from_fd();
    test_devices();
    CHECK_EQ(count_fds(), fds0);
    CHECK_EQ(count_maps(), maps0);
    ts_memory_stats(ts_cpu(), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(after.allocated, before.allocated);
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
