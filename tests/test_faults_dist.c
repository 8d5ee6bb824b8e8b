/* test_faults_dist.c — faults across processes, each a 4-rank job of tests/dist_fault_helper.c that
 * this test starts with mpiexec (TS_DIST_TIMEOUT=3): a rank that hangs (SIGSTOP) mid-loop of
 * all_reduces — the others must fail within 60 s naming it, and the job must end; a rank that dies
 * (SIGKILL) — the job must end within 60 s with output naming it; a receive nobody sends to — it
 * times out naming the sender; Ctrl-C (SIGINT to mpirun) — no
 * process of the job may be left behind. With tests/fsdp_fault_helper.c: a rank that dies during
 * FSDP training (the job ends naming it), and one SIGKILLed in the middle of a sharded save (the
 * previous checkpoint stays committed and loads on 2 ranks with the same parameters; the next
 * save there leaves no file of the failed one). Skips without MPI. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ts_test.h"

#ifndef TS_FAULT_HELPER
#define TS_FAULT_HELPER ""
#endif
#if defined(TS_HAVE_MPI) && defined(TS_FSDP_FAULT_HELPER)
#define TS_FSDP_FAULT_HELPER_OK 1 /* tests/fsdp_fault_helper.c: faults in sharded training */
#endif
#ifndef TS_MPIEXEC
#define TS_MPIEXEC ""
#endif

#ifdef TS_HAVE_MPI
static char token[64]; /* on every helper's command line: finds this test's processes in /proc */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    pid_t pid; /* mpiexec */
    int fd;    /* its stdout and stderr */
    char out[65536];
    size_t len;
} job;

/* Starts `mpiexec -np NP HELPER ARGS... TOKEN` (args NULL-terminated). */
static void start_job(job *j, const char *helper, const char *np, const char *const *args) {
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        exit(1);
    }
    j->len = 0;
    j->out[0] = '\0';
    j->pid = fork();
    if (j->pid == 0) {
        setpgid(0, 0); /* its own process group: this test can end all of it when it must */
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        setenv("TS_DIST_TIMEOUT", "3", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        const char *argv[32] = {
            TS_MPIEXEC,  "-np",  np,    "--oversubscribe", "--allow-run-as-root",
            "--bind-to", "none", helper};
        int n = 8;
        for (int i = 0; args[i] && n < 30; i++) argv[n++] = args[i];
        argv[n++] = token;
        argv[n] = NULL;
        execv(TS_MPIEXEC, (char *const *)argv);
        perror("execv " TS_MPIEXEC);
        _exit(127);
    }
    close(p[1]);
    j->fd = p[0];
}

static void start(job *j, const char *mode, const char *victim) {
    const char *args[] = {mode, victim, NULL};
    start_job(j, TS_FAULT_HELPER, "4", args);
}

/* Reads output until `until` appears `times` times (NULL: until EOF) or the deadline passes. */
static bool read_until(job *j, double deadline, const char *until, int times) {
    for (;;) {
        if (until) {
            int n = 0;
            for (const char *s = j->out; (s = strstr(s, until)); s++) n++;
            if (n >= times) return true;
        }
        double left = deadline - now();
        if (left <= 0) return false;
        struct pollfd pfd = {j->fd, POLLIN, 0};
        int rc = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) return false;
        ssize_t got = read(j->fd, j->out + j->len, sizeof j->out - 1 - j->len);
        if (got <= 0) return until == NULL; /* EOF */
        j->len += (size_t)got;
        j->out[j->len] = '\0';
    }
}

/* Waits for mpiexec's exit until the deadline; on timeout ends the whole job. Returns the wait
 * status, or -1 on timeout. */
static int finish(job *j, double deadline) {
    bool eof = read_until(j, deadline, NULL, 0);
    int status = 0;
    for (;;) {
        pid_t r = waitpid(j->pid, &status, WNOHANG);
        if (r == j->pid) break;
        if (now() > deadline || !eof) {
            kill(-j->pid, SIGKILL);
            waitpid(j->pid, &status, 0);
            close(j->fd);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(j->fd);
    return status;
}

/* Processes still alive (not zombies) whose command line holds this test's token. */
static int survivors(void) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        for (ssize_t i = 0; i < len; i++)
            if (buf[i] == '\0') buf[i] = ' ';
        buf[len] = '\0';
        if (!strstr(buf, token) || !strstr(buf, "fault_helper") || strstr(buf, TS_MPIEXEC " "))
            continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char state = '?';
        if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = '?';
        fclose(f);
        if (state != 'Z' && state != 'X') n++;
    }
    closedir(d);
    return n;
}

/* no helper left behind (a few seconds' grace for mpirun's last kills) */
static void check_no_survivors(const char *what) {
    double deadline = now() + 10;
    int n;
    while ((n = survivors()) > 0 && now() < deadline) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (n) fprintf(stderr, "%s: %d helper processes are still running\n", what, n);
    CHECK_EQ(n, 0);
}

static void show(const char *what, job *j) {
    printf("---- %s: output of the job ----\n%s---- end of %s ----\n", what, j->out, what);
}

/* a rank hangs: the others time out naming it, and the job ends */
static void hang(void) {
    job j;
    double t0 = now();
    start(&j, "stop", "2");
    int st = finish(&j, t0 + 60);
    double s = now() - t0;
    printf("a rank that hangs (SIGSTOP): the job ended after %.1f s, %s\n", s,
           st == -1 ? "NOT by itself (killed at 60 s)" : "by itself");
    CHECK(st != -1);
    CHECK(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CHECK(strstr(j.out, "timed out after 3.0 s: rank 2 did not join it (ranks 0, 1, 3 are "
                        "waiting)") != NULL);
    CHECK(strstr(j.out, "all_reduce #21 on the world") != NULL);
    CHECK(strstr(j.out, "a call after the fault succeeded") == NULL);
    CHECK(strstr(j.out, "aborting the job") != NULL);
    CHECK(s < 60);
    if (ts_test_failed_count()) show("hang", &j);
    check_no_survivors("hang");
}

/* a rank dies: mpirun ends the job and names it */
static void death(void) {
    job j;
    double t0 = now();
    start(&j, "kill", "1");
    int st = finish(&j, t0 + 60);
    double s = now() - t0;
    printf("a rank that dies (SIGKILL): the job ended after %.1f s, %s\n", s,
           st == -1 ? "NOT by itself (killed at 60 s)" : "by itself");
    CHECK(st != -1);
    CHECK(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CHECK(strstr(j.out, "process rank 1") != NULL);
    CHECK(strstr(j.out, "signal 9") != NULL);
    CHECK(s < 60);
    int before = ts_test_failed_count();
    check_no_survivors("death");
    if (ts_test_failed_count() != before || st == -1) show("death", &j);
}

/* a receive that no rank sends to: it times out naming the sender, and the job ends */
static void lonely_recv(void) {
    job j;
    double t0 = now();
    start(&j, "recv", "1");
    int st = finish(&j, t0 + 60);
    double s = now() - t0;
    printf("a receive nobody sends to: the job ended after %.1f s, %s\n", s,
           st == -1 ? "NOT by itself (killed at 60 s)" : "by itself");
    CHECK(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CHECK(strstr(j.out, "rank 0: recv on the world timed out after 3.0 s: rank 1 did not send it "
                        "(tag 3, rank 0 is waiting)") != NULL);
    int before = ts_test_failed_count();
    check_no_survivors("recv");
    if (ts_test_failed_count() != before || st == -1 || !strstr(j.out, "did not send it"))
        show("recv", &j);
}

/* Ctrl-C: SIGINT to mpirun alone must take every rank with it */
static void interrupt(void) {
    job j;
    double t0 = now();
    start(&j, "loop", "-1");
    bool ready = read_until(&j, t0 + 60, " ready", 4);
    CHECK(ready);
    CHECK(survivors() == 4);
    kill(j.pid, SIGINT);
    double t1 = now();
    int st = finish(&j, t1 + 30);
    printf("Ctrl-C of mpirun: it exited %.1f s after SIGINT (%s)\n", now() - t1,
           st == -1 ? "NOT by itself" : "by itself");
    CHECK(st != -1);
    check_no_survivors("Ctrl-C");
    if (ts_test_failed_count()) show("Ctrl-C", &j);
}

#ifdef TS_FSDP_FAULT_HELPER_OK
/* a rank dies during FSDP training: mpirun ends the job and names it */
static void fsdp_death(void) {
    job j;
    double t0 = now();
    const char *args[] = {"train", "2", NULL};
    start_job(&j, TS_FSDP_FAULT_HELPER, "4", args);
    int st = finish(&j, t0 + 60);
    printf("a rank that dies in FSDP training: the job ended after %.1f s, %s\n", now() - t0,
           st == -1 ? "NOT by itself (killed at 60 s)" : "by itself");
    int before = ts_test_failed_count();
    CHECK(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CHECK(strstr(j.out, "rank 2 kills itself") != NULL);
    CHECK(strstr(j.out, "process rank 2") != NULL);
    CHECK(strstr(j.out, "signal 9") != NULL);
    CHECK(strstr(j.out, " done") == NULL);
    check_no_survivors("fsdp death");
    if (ts_test_failed_count() != before) show("fsdp death", &j);
}

/* The files left in dir (names joined by spaces, sorted by readdir's order), and removes dir when
 * `remove` is set. */
static void list_dir(const char *dir, char *out, size_t cap, bool remove) {
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s ", e->d_name);
        if (remove) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
    if (remove) rmdir(dir);
}

/* a rank SIGKILLed in the middle of ts_fsdp_save_sharded (its shard's temporary file just
 * created): the job ends, the previous sharded checkpoint stays committed and loads on another
 * world size (2 ranks) with the parameters it saved, and the next save there cleans up */
static void fsdp_save_death(void) {
    char dir[] = "/tmp/ts-fsdp-fault-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        CHECK(0);
        return;
    }
    job j;
    double t0 = now();
    const char *args[] = {"save", "1", dir, NULL};
    start_job(&j, TS_FSDP_FAULT_HELPER, "4", args);
    int st = finish(&j, t0 + 60);
    printf("a rank that dies in a sharded save: the job ended after %.1f s, %s\n", now() - t0,
           st == -1 ? "NOT by itself (killed at 60 s)" : "by itself");
    int before = ts_test_failed_count();
    CHECK(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CHECK(strstr(j.out, "rank 1 kills itself while writing .shard.2.1-of-4.safetensors") != NULL);
    CHECK(strstr(j.out, "the second save was committed") == NULL);
    char saved[128] = "";
    const char *s = strstr(j.out, "saved: step 2 checksum ");
    if (s) sscanf(s + strlen("saved: step 2 checksum "), "%127s", saved);
    CHECK(saved[0] != '\0');
    check_no_survivors("fsdp save death");
    if (ts_test_failed_count() != before) show("fsdp save death", &j);

    /* the previous checkpoint, loaded by 2 ranks */
    job l;
    t0 = now();
    const char *largs[] = {"load", dir, NULL};
    start_job(&l, TS_FSDP_FAULT_HELPER, "2", largs);
    st = finish(&l, t0 + 60);
    before = ts_test_failed_count();
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char want[200];
    snprintf(want, sizeof want, "loaded: step 2 checksum %s\n", saved);
    CHECK(strstr(l.out, want) != NULL);
    CHECK(strstr(l.out, "saved again: step 3") != NULL);
    /* the commit on 2 ranks leaves its manifest and its 2 shards: no temporary, no file of the
     * 4 ranks' uncommitted save */
    char files[4096];
    list_dir(dir, files, sizeof files, true);
    printf("after the load and save on 2 ranks: %s\n", files);
    CHECK(strstr(files, "manifest.safetensors") != NULL);
    CHECK(strstr(files, "shard.2.0-of-2.safetensors") != NULL);
    CHECK(strstr(files, "shard.2.1-of-2.safetensors") != NULL);
    CHECK(strstr(files, "-of-4") == NULL);
    CHECK(strstr(files, ".tmp") == NULL);
    if (ts_test_failed_count() != before) show("fsdp load after the failed save", &l);
}
#endif

#endif

int main(void) {
#ifndef TS_HAVE_MPI
    return ts_test_skip("built without MPI: no processes to fault");
#else
    if (!*TS_MPIEXEC || access(TS_MPIEXEC, X_OK) != 0)
        return ts_test_skip("no mpiexec (%s)", TS_MPIEXEC);
    if (access(TS_FAULT_HELPER, X_OK) != 0)
        return ts_test_skip("the helper %s is not built", TS_FAULT_HELPER);
    snprintf(token, sizeof token, "ts-fault-%ld", (long)getpid());
    signal(SIGPIPE, SIG_IGN);
    hang();
    death();
    lonely_recv();
    interrupt();
#ifdef TS_FSDP_FAULT_HELPER_OK
    if (access(TS_FSDP_FAULT_HELPER, X_OK) == 0) {
        fsdp_death();
        fsdp_save_death();
    } else {
        printf("the helper %s is not built: no FSDP faults\n", TS_FSDP_FAULT_HELPER);
    }
#endif
    return ts_test_finish();
#endif
}
