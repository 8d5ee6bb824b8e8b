/* dist_fault_helper.c — the program test_faults_dist.c runs under mpiexec: a loop of all_reduces in
 * which one rank hangs (SIGSTOP) or dies (SIGKILL), or an endless loop to interrupt (Ctrl-C).
 * Usage: dist_fault_helper stop|kill|loop|ok VICTIM_RANK */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s stop|kill|recv|loop VICTIM_RANK\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    int victim = atoi(argv[2]);
    if (ts_dist_init((ts_dist_opts){0}) != TS_OK) {
        fprintf(stderr, "init: %s\n", ts_error_message());
        return 1;
    }
    int r = ts_dist_rank();
    ts_tensor *t = ts_ones(TS_SHAPE(1000), (ts_opts){0});
    printf("rank %d ready\n", r);
    fflush(stdout);
    if (strcmp(mode, "recv") == 0) {
        /* rank 0 waits for a message rank `victim` never sends; the others wait in a barrier */
        ts_status st = r == 0 ? ts_dist_recv(t, victim, 3, NULL) : ts_dist_barrier();
        if (st != TS_OK) fprintf(stderr, "rank %d: %s\n", r, ts_error_message());
        ts_dist_finalize(); /* rank 0: aborts the job */
        return 1;
    }
    bool forever = strcmp(mode, "loop") == 0;
    for (long i = 0; forever || i < 200; i++) {
        if (i == 20 && r == victim) {
            if (strcmp(mode, "stop") == 0) {
                fprintf(stderr, "rank %d stops itself (SIGSTOP)\n", r);
                raise(SIGSTOP);
            } else if (strcmp(mode, "kill") == 0) {
                fprintf(stderr, "rank %d kills itself (SIGKILL)\n", r);
                raise(SIGKILL);
            }
        }
        if (ts_dist_all_reduce(t, TS_DIST_AVG, NULL) != TS_OK) {
            fprintf(stderr, "rank %d: %s\n", r, ts_error_message());
            /* a second call fails at once with the same error */
            if (ts_dist_all_reduce(t, TS_DIST_AVG, NULL) == TS_OK)
                fprintf(stderr, "rank %d: a call after the fault succeeded\n", r);
            ts_dist_finalize(); /* aborts the job: the group is broken */
            return 1;
        }
        if (forever) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    ts_release(t);
    ts_dist_finalize();
    printf("rank %d done\n", r);
    return 0;
}
