/* trainer_run.c — the harness of the `tessera` command's end-to-end tests (trainer_run.h). */
#define _POSIX_C_SOURCE 200809L
#define TS_TRAINER_RUN_IMPL
#include "trainer_run.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ts_test.h"

char trainer_dir[256];
uint8_t trainer_test_img[NTEST * SIDE * SIDE], trainer_test_lab[NTEST];
static const char *tessera_bin;

/* ------------------------------------------------------------ synthetic data */
uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

/* Class k: a bright 6x6 block at a place of its own on a noisy background, so a small model
 * learns it within two epochs. */
static void make_images(uint8_t *img, uint8_t *lab, int n, uint32_t seed) {
    for (int i = 0; i < n; i++) {
        int k = (int)(lcg(&seed) >> 8) % CLASSES;
        lab[i] = (uint8_t)k;
        uint8_t *p = img + (size_t)i * SIDE * SIDE;
        for (int j = 0; j < SIDE * SIDE; j++) p[j] = (uint8_t)(lcg(&seed) >> 26);
        int r0 = 2 + (k / 5) * 12, c0 = 2 + (k % 5) * 5;
        for (int r = r0; r < r0 + 6; r++)
            for (int c = c0; c < c0 + 4; c++) p[r * SIDE + c] = (uint8_t)(180 + (lcg(&seed) >> 27));
    }
}

static void put_be32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fwrite(b, 1, 4, f);
}

static void write_idx(const char *name, const uint8_t *img, const uint8_t *lab, int n) {
    char path[512];
    snprintf(path, sizeof path, "%s/data/%s-images-idx3-ubyte", trainer_dir, name);
    FILE *f = fopen(path, "wb");
    put_be32(f, 0x803), put_be32(f, (uint32_t)n), put_be32(f, SIDE), put_be32(f, SIDE);
    fwrite(img, 1, (size_t)n * SIDE * SIDE, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/data/%s-labels-idx1-ubyte", trainer_dir, name);
    f = fopen(path, "wb");
    put_be32(f, 0x801), put_be32(f, (uint32_t)n);
    fwrite(lab, 1, (size_t)n, f);
    fclose(f);
}

/* ------------------------------------------------------------ running tessera */

char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    if (len) *len = got;
    return s;
}

/* Runs argv (NULL-terminated, argv[0] the program) with extra "K=V" environment entries. */
result run_argv(const char *const *env, const char *const *argv) {
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/stdout", trainer_dir);
    snprintf(err, sizeof err, "%s/stderr", trainer_dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1), dup2(fe, 2);
        close(fo), close(fe);
        for (int i = 0; env && env[i]; i++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            *eq = 0;
            setenv(kv, eq + 1, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    result r = {0};
    waitpid(pid, &r.status, 0);
    r.out = slurp(out, NULL);
    r.err = slurp(err, NULL);
    return r;
}
/* Runs tessera with the arguments (NULL-terminated) and extra "K=V" environment entries. */
result run_env(const char *const *env, const char *const *args) {
    const char *argv[64] = {tessera_bin};
    int n = 1;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    return run_argv(env, argv);
}

void result_free(result *r) {
    free(r->out);
    free(r->err);
}
int exit_code(const result *r) { return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1; }
bool killed(const result *r) { return WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGKILL; }
int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Success: status 0 and nothing on stderr (sanitizer and leak reports would land there). */
void check_clean_exit(const result *r) {
    CHECK_EQ(exit_code(r), 0);
    CHECK(r->err && !*r->err);
    if (exit_code(r) != 0 || (r->err && *r->err)) fprintf(stderr, "  stderr: %s\n", r->err);
}

/* A user's mistake: status 2, nothing on stdout, one "tessera: ..." line on stderr: exactly the
 * expected line (printf-style), or with prefix_only a line that starts so (messages whose tail
 * comes from the library or the system). */
void check_usage(result r, bool prefix_only, const char *fmt, ...) {
    char want[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    CHECK_EQ(exit_code(&r), 2);
    CHECK(r.out && !*r.out);
    CHECK(r.err && !strncmp(r.err, "tessera: ", 9));
    CHECK_EQ(count_lines(r.err), 1);
    bool match =
        r.err && (prefix_only ? !strncmp(r.err, want, strlen(want)) : !strcmp(r.err, want));
    CHECK(match);
    if (!match || exit_code(&r) != 2 || count_lines(r.err) != 1)
        fprintf(stderr, "  expected%s: %s%s  got: %s", prefix_only ? " a line starting" : "", want,
                prefix_only ? "\n" : "", r.err ? r.err : "(nothing)\n");
    result_free(&r);
}

/* ------------------------------------------------------------ output lines */

/* The "epoch E/N  train loss L acc A  test loss L acc A  time Ts" lines, in order. */
int parse_epochs(const char *out, epoch_line *ls, int max) {
    int n = 0;
    for (const char *p = out; p && *p && n < max;) {
        epoch_line e;
        if (sscanf(p, "epoch %d/%d  train loss %lf acc %lf  test loss %lf acc %lf  time %lfs",
                   &e.epoch, &e.epochs, &e.train_loss, &e.train_acc, &e.test_loss, &e.test_acc,
                   &e.secs) == 7)
            ls[n++] = e;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

double final_accuracy(const char *out) {
    const char *p = out ? strstr(out, "test accuracy: ") : NULL;
    return p ? strtod(p + 15, NULL) : -1;
}

char *path_in(const char *sub, const char *file) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 512, "%s/%s%s%s", trainer_dir, sub, file ? "/" : "", file ? file : "");
    return b;
}

bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* Accuracy of the saved MLP on the test images, computed here in double precision from the
 * weights file: an independent check of what the trainer printed. */
double mlp_reference_accuracy(const char *weights) {
    ts_tensor_list l = {0};
    if (ts_safetensors_load(weights, ts_cpu(), &l)) return -1;
    static float w1[128 * 784], b1[128], w2[10 * 128], b2[10];
    ts_copy_to_host(ts_tensor_list_get(&l, "fc1.weight"), w1, sizeof w1);
    ts_copy_to_host(ts_tensor_list_get(&l, "fc1.bias"), b1, sizeof b1);
    ts_copy_to_host(ts_tensor_list_get(&l, "fc2.weight"), w2, sizeof w2);
    ts_copy_to_host(ts_tensor_list_get(&l, "fc2.bias"), b2, sizeof b2);
    ts_tensor_list_free(&l);
    int correct = 0;
    for (int i = 0; i < NTEST; i++) {
        double x[784], h[128], best = -INFINITY;
        int arg = -1;
        for (int j = 0; j < 784; j++) /* --data mnist: MNIST's mean and std */
            x[j] = ((double)(float)(trainer_test_img[i * 784 + j] / 255.0f) - 0.1307) / 0.3081;
        for (int u = 0; u < 128; u++) {
            double s = b1[u];
            for (int j = 0; j < 784; j++) s += (double)w1[u * 784 + j] * x[j];
            h[u] = s > 0 ? s : 0;
        }
        for (int c = 0; c < 10; c++) {
            double s = b2[c];
            for (int u = 0; u < 128; u++) s += (double)w2[c * 128 + u] * h[u];
            if (s > best) best = s, arg = c;
        }
        correct += arg == trainer_test_lab[i];
    }
    return (double)correct / NTEST;
}

bool has_tmp_file(const char *dir) {
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, ".latest.safetensors.tmp", 23)) found = true;
    if (d) closedir(d);
    return found;
}

/* An int64 scalar of a safetensors file ("step" of a checkpoint), or -1. */
int64_t tensor_i64(const char *path, const char *name) {
    ts_tensor_list l = {0};
    int64_t v = -1;
    if (!ts_safetensors_load(path, ts_cpu(), &l)) {
        ts_tensor *t = ts_tensor_list_get(&l, name);
        if (t) ts_copy_to_host(t, &v, sizeof v);
    }
    ts_error_clear();
    ts_tensor_list_free(&l);
    return v;
}

int64_t checkpoint_step(const char *path) { return tensor_i64(path, "step"); }

/* largest |a - b| / max |b| over every tensor of two safetensors files (INFINITY when the names
 * or shapes differ) */
double weights_rel_diff(const char *a, const char *b) {
    ts_tensor_list la = {0}, lb = {0};
    double worst = INFINITY;
    if (!ts_safetensors_load(a, ts_cpu(), &la) && !ts_safetensors_load(b, ts_cpu(), &lb) &&
        la.n == lb.n && la.n > 0) {
        worst = 0;
        for (int i = 0; i < la.n; i++) {
            ts_tensor *tb = ts_tensor_list_get(&lb, la.names[i]);
            ts_scope_begin();
            double d = tb && ts_numel(tb) == ts_numel(la.tensors[i])
                           ? ts_item(ts_max(ts_abs(ts_sub(la.tensors[i], tb)))) /
                                 ts_item(ts_max(ts_abs(tb)))
                           : INFINITY;
            ts_scope_end();
            if (!(d <= worst)) worst = d;
        }
    }
    ts_error_clear();
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat sb;
        if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(sub);
        else
            remove(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

void write_toy_csv(const char *path) {
    FILE *f = fopen(path, "w");
    fprintf(f, "a,b,label,noise\n");
    uint32_t seed = 3;
    for (int i = 0; i < 200; i++) {
        int k = (int)(lcg(&seed) >> 8) % 3;
        double u = (double)(lcg(&seed) >> 8) / 16777216.0,
               v = (double)(lcg(&seed) >> 8) / 16777216.0;
        fprintf(f, "%.3f,%.3f,%d,%.3f\n", 10.0 * k + 4 * (u - 0.5), 100 - 50.0 * k + 30 * (v - 0.5),
                k, u * v);
    }
    fclose(f);
}

bool trainer_setup(const char *tessera) {
    tessera_bin = tessera;
    const char *base = getenv("TMPDIR");
    snprintf(trainer_dir, sizeof trainer_dir, "%s/tessera_trainer_XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(trainer_dir)) return false;
    mkdir(path_in("data", NULL), 0777);
    mkdir(path_in("empty", NULL), 0777);
    static uint8_t img[NTRAIN * SIDE * SIDE], lab[NTRAIN];
    make_images(img, lab, NTRAIN, 1);
    make_images(trainer_test_img, trainer_test_lab, NTEST, 2);
    write_idx("train", img, lab, NTRAIN);
    write_idx("t10k", trainer_test_img, trainer_test_lab, NTEST);
    return true;
}

void trainer_cleanup(void) { remove_tree(trainer_dir); }
