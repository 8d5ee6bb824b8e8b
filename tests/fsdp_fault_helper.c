/* fsdp_fault_helper.c — the sharded-training program test_faults_dist.c runs under mpiexec: a small
 * GPT under FSDP stage 3 (two units) with AdamW, where
 *   train VICTIM TOKEN        rank VICTIM SIGKILLs itself at the start of step 5's forward;
 *   save VICTIM DIR TOKEN     2 steps, a committed sharded save to DIR (rank 0 prints "saved:
 *                             step 2 checksum X"), a third step, then a second save during which
 *                             rank VICTIM SIGKILLs itself as soon as its shard's temporary file
 *                             appears (a thread watching DIR with inotify);
 *   load DIR TOKEN            loads DIR (any world size), rank 0 prints "loaded: step S checksum
 *                             X", takes a step and saves again ("saved again: generation G").
 * The checksum is the sum of every parameter, gathered, in float64: equal on any world size. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "tessera.h"

static const ts_gpt_config CFG = {
    .vocab_size = 32, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 64};
static const char *const UNITS[] = {"blocks.0", "blocks.1"};
static int rank;

static void fail(const char *what) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, ts_error_message());
    ts_dist_finalize(); /* a broken group aborts the job */
    exit(1);
}

static void step(ts_module *f, ts_optim *opt, int i) {
    ts_scope_begin();
    ts_manual_seed(500 + (uint64_t)i * 16 + (uint64_t)rank);
    ts_tensor *x =
        ts_randint(0, CFG.vocab_size, TS_SHAPE(2, CFG.context), (ts_opts){.dtype = TS_I64});
    ts_tensor *y =
        ts_randint(0, CFG.vocab_size, TS_SHAPE(2, CFG.context), (ts_opts){.dtype = TS_I64});
    ts_optim_zero_grad(opt);
    ts_tensor *out = ts_forward(f, x);
    ts_backward(
        ts_cross_entropy(ts_view(out, TS_SHAPE(-1, CFG.vocab_size)), ts_view(y, TS_SHAPE(-1))));
    ts_optim_step(opt);
    ts_scope_end();
    if (ts_error()) fail("step");
}

static double checksum(ts_module *f) {
    if (ts_fsdp_unshard(f)) fail("unshard");
    ts_tensor_list l = ts_module_named_parameters(ts_fsdp_module(f));
    double s = 0;
    for (int i = 0; i < l.n; i++) {
        ts_scope_begin();
        s += ts_item(ts_sum(ts_to_dtype(l.tensors[i], TS_F64)));
        ts_scope_end();
    }
    ts_tensor_list_free(&l);
    return s;
}

/* The victim's watcher (on the inotify descriptor arg, which watches DIR since before the
 * save): SIGKILL as soon as its shard of generation 2 starts being written. */
static void *watch(void *arg) {
    int fd = *(int *)arg;
    char prefix[64];
    snprintf(prefix, sizeof prefix, ".shard.2.%d-of-", rank);
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return NULL;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            if (e->len && !strncmp(e->name, prefix, strlen(prefix))) {
                fprintf(stderr, "rank %d kills itself while writing %s (SIGKILL)\n", rank, e->name);
                raise(SIGKILL);
            }
            p += sizeof *e + e->len;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s train VICTIM | save VICTIM DIR | load DIR\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    if (ts_dist_init((ts_dist_opts){0}) != TS_OK) fail("init");
    rank = ts_dist_rank();
    ts_manual_seed(3);
    ts_module *f = ts_fsdp_new(ts_gpt_new(CFG), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    if (!f) fail("fsdp");
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_adamw_new_params(sh.tensors, sh.n, (ts_adam_opts){.lr = 1e-2});
    ts_tensor_list_free(&sh);
    ts_fsdp_checkpoint c = {.optim = opt};
    printf("rank %d ready\n", rank);
    fflush(stdout);
    if (!strcmp(mode, "train")) {
        int victim = atoi(argv[2]);
        for (int i = 0; i < 50; i++) {
            if (i == 5 && rank == victim) {
                fprintf(stderr, "rank %d kills itself (SIGKILL)\n", rank);
                raise(SIGKILL);
            }
            step(f, opt, i);
        }
    } else if (!strcmp(mode, "save") && argc >= 4) {
        int victim = atoi(argv[2]);
        const char *dir = argv[3];
        step(f, opt, 0);
        step(f, opt, 1);
        c.step = 2;
        if (ts_fsdp_save_sharded(f, dir, &c)) fail("first save");
        double s = checksum(f);
        if (rank == 0) printf("saved: step 2 checksum %.17g\n", s);
        fflush(stdout);
        step(f, opt, 2);
        c.step = 3;
        pthread_t th;
        static int fd = -1;
        if (rank == victim) {
            fd = inotify_init();
            if (fd < 0 || inotify_add_watch(fd, dir, IN_CREATE) < 0) {
                perror("inotify");
                return 1;
            }
            if (pthread_create(&th, NULL, watch, &fd)) return 1;
        }
        ts_dist_barrier(); /* the watch is set before anyone writes */
        if (ts_fsdp_save_sharded(f, dir, &c)) fail("second save");
        fprintf(stderr, "rank %d: the second save was committed\n", rank);
    } else if (!strcmp(mode, "load")) {
        const char *dir = argv[2];
        if (ts_fsdp_load_sharded(f, dir, &c)) fail("load");
        double s = checksum(f);
        if (rank == 0) printf("loaded: step %lld checksum %.17g\n", (long long)c.step, s);
        step(f, opt, (int)c.step);
        c.step++;
        if (ts_fsdp_save_sharded(f, dir, &c)) fail("save after the load");
        if (rank == 0) printf("saved again: step %lld\n", (long long)c.step);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    ts_optim_free(opt);
    ts_module_free(f);
    ts_dist_finalize();
    printf("rank %d done\n", rank);
    return 0;
}
