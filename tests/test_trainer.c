/* test_trainer.c — the `tessera` command end to end: training on cpu and sim:0 over a synthetic IDX
 * data set, its output lines and exit statuses, one-line errors, eval, devices, logs, and exact
 * resume after SIGKILL mid-epoch and mid-checkpoint. */
#define _POSIX_C_SOURCE 200809L
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

#if !defined(TS_TESSERA_BIN) || !defined(TS_TESSERA_NODATA_BIN)
#error "TS_TESSERA_BIN and TS_TESSERA_NODATA_BIN must name the tessera executables"
#endif

enum { NTRAIN = 512, NTEST = 128, SIDE = 28, CLASSES = 10 };
static char tmp[256];

/* ------------------------------------------------------------ synthetic data */
static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

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
    snprintf(path, sizeof path, "%s/data/%s-images-idx3-ubyte", tmp, name);
    FILE *f = fopen(path, "wb");
    put_be32(f, 0x803), put_be32(f, (uint32_t)n), put_be32(f, SIDE), put_be32(f, SIDE);
    fwrite(img, 1, (size_t)n * SIDE * SIDE, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/data/%s-labels-idx1-ubyte", tmp, name);
    f = fopen(path, "wb");
    put_be32(f, 0x801), put_be32(f, (uint32_t)n);
    fwrite(lab, 1, (size_t)n, f);
    fclose(f);
}

static uint8_t test_img[NTEST * SIDE * SIDE], test_lab[NTEST];

/* ------------------------------------------------------------ running tessera */
typedef struct result {
    int status; /* waitpid's */
    char *out, *err;
} result;

static char *slurp(const char *path, size_t *len) {
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
static result run_argv(const char *const *env, const char *const *argv) {
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/stdout", tmp);
    snprintf(err, sizeof err, "%s/stderr", tmp);
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
static result run_env(const char *const *env, const char *const *args) {
    const char *argv[64] = {TS_TESSERA_BIN};
    int n = 1;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    return run_argv(env, argv);
}
#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_ENV(env, ...)                                                                          \
    run_env((const char *const[]){env, NULL}, (const char *const[]){__VA_ARGS__, NULL})

static void result_free(result *r) {
    free(r->out);
    free(r->err);
}
static int exit_code(const result *r) { return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1; }
static bool killed(const result *r) {
    return WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGKILL;
}
static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Success: status 0 and nothing on stderr (sanitizer and leak reports would land there). */
static void check_clean_exit(const result *r) {
    CHECK_EQ(exit_code(r), 0);
    CHECK(r->err && !*r->err);
    if (exit_code(r) != 0 || (r->err && *r->err)) fprintf(stderr, "  stderr: %s\n", r->err);
}

/* A user's mistake: status 2, nothing on stdout, one "tessera: ..." line on stderr: exactly the
 * expected line (printf-style), or with prefix_only a line that starts so (messages whose tail
 * comes from the library or the system). */
static void __attribute__((format(printf, 3, 4)))
check_usage(result r, bool prefix_only, const char *fmt, ...) {
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
#define check_usage_error(r, ...)  check_usage(r, false, __VA_ARGS__)
#define check_usage_prefix(r, ...) check_usage(r, true, __VA_ARGS__)

/* ------------------------------------------------------------ output lines */
typedef struct epoch_line {
    int epoch, epochs;
    double train_loss, train_acc, test_loss, test_acc, secs;
} epoch_line;

/* The "epoch E/N  train loss L acc A  test loss L acc A  time Ts" lines, in order. */
static int parse_epochs(const char *out, epoch_line *ls, int max) {
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

static double final_accuracy(const char *out) {
    const char *p = out ? strstr(out, "test accuracy: ") : NULL;
    return p ? strtod(p + 15, NULL) : -1;
}

static char *path_in(const char *sub, const char *file) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 512, "%s/%s%s%s", tmp, sub, file ? "/" : "", file ? file : "");
    return b;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* Accuracy of the saved MLP on the test images, computed here in double precision from the
 * weights file: an independent check of what the trainer printed. */
static double mlp_reference_accuracy(const char *weights) {
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
            x[j] = ((double)(float)(test_img[i * 784 + j] / 255.0f) - 0.1307) / 0.3081;
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
        correct += arg == test_lab[i];
    }
    return (double)correct / NTEST;
}

static bool has_tmp_file(const char *dir) {
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, ".latest.safetensors.tmp", 23)) found = true;
    if (d) closedir(d);
    return found;
}

/* An int64 scalar of a safetensors file ("step" of a checkpoint), or -1. */
static int64_t tensor_i64(const char *path, const char *name) {
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

static int64_t checkpoint_step(const char *path) { return tensor_i64(path, "step"); }

/* ------------------------------------------------------------ the tests */
#define DATA "--data", "mnist", "--data-dir", path_in("data", NULL)

static void test_help_and_errors(void) {
    result r = RUN("--help");
    check_clean_exit(&r);
    const char *opts[] = {"train",         "eval",         "devices",      "--model",
                          "mlp",           "lenet",        "simplecnn",    "--data",
                          "fashion-mnist", "cifar10",      "csv",          "--data-dir",
                          "--device",      "sim:N",        "--epochs",     "--batch-size",
                          "--lr",          "--momentum",   "--optimizer",  "adam",
                          "--seed",        "--workers",    "--checkpoint", "--resume",
                          "--log",         "--csv-target", "--threads",    "dataset-fashion-mnist",
                          "--devices",     "--amp",        "--amp-dtype",  "resnet20",
                          "resnet18",      "--width",      "--augment"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        bool in = r.out && strstr(r.out, opts[i]);
        CHECK(in);
        if (!in) fprintf(stderr, "  --help lacks %s\n", opts[i]);
    }
    result_free(&r);
    r = RUN("train", "--help");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "usage: tessera"));
    result_free(&r);

    /* flags and commands: the argument list and the whole line it must give */
    static const struct {
        const char *args[6];
        const char *line;
    } mistakes[] = {
        {{"train", "--epochs", "x"}, "--epochs: expected a positive integer, got 'x'"},
        {{"train", "--epochs=0"}, "--epochs: expected a positive integer, got '0'"},
        {{"train", "--lr", "-1"}, "--lr: expected a positive number, got '-1'"},
        {{"train", "--momentum", "1.5"}, "--momentum: expected a number in [0, 1), got '1.5'"},
        {{"train", "--batch-size", "12abc"},
         "--batch-size: expected a positive integer, got '12abc'"},
        {{"train", "--model", "resnet"},
         "--model: expected mlp, lenet, simplecnn, resnet20, resnet18 or gpt, got 'resnet'"},
        {{"train", "--optimizer", "lbfgs"},
         "--optimizer: expected sgd, adam or adamw, got 'lbfgs'"},
        {{"train", "--device", "gpu"}, "--device: expected cpu, cuda, cuda:N or sim:N, got 'gpu'"},
        {{"train", "--frobnicate"}, "unknown option '--frobnicate' (see tessera --help)"},
        {{"train", "--lr"}, "--lr: missing value"},
        {{"train", "stray"},
         "unexpected argument 'stray' (options start with --; see tessera --help)"},
        {{"train", "--resume"}, "--resume: needs --checkpoint DIR (the folder to resume from)"},
        {{"eval", "--model", "mlp"}, "eval: needs --checkpoint DIR (or a .safetensors file)"},
        {{"eval", "--epochs", "3", "--checkpoint", "x"},
         "--epochs: not an option of 'tessera eval' (see tessera --help)"},
        {{"fly"},
         "unknown command 'fly': expected train, eval, generate or devices (see tessera "
         "--help)"},
        {{"devices", "--epochs", "1"},
         "--epochs: not an option of 'tessera devices' (see tessera --help)"},
    };
    for (size_t i = 0; i < sizeof mistakes / sizeof *mistakes; i++)
        check_usage_error(run_env(NULL, mistakes[i].args), "tessera: %s\n", mistakes[i].line);
    check_usage_prefix(RUN("train", "--device", "cuda:7"),
                       "tessera: --device: cuda:7 is not available (");
    {
        const char *const none[] = {NULL};
        check_usage_error(run_env(NULL, none), "tessera: missing command: train, eval, generate or "
                                               "devices (see tessera --help)\n");
    }
    /* missing data: a folder that is not there, a folder without the files, mnist's default */
    check_usage_error(RUN("train", "--data-dir", path_in("nowhere", NULL)),
                      "tessera: --data-dir: '%s': No such file or directory (it should hold "
                      "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])\n",
                      path_in("nowhere", NULL));
    check_usage_prefix(RUN("train", "--data", "mnist", "--data-dir", path_in("empty", NULL)),
                       "tessera: %s: No such file or directory",
                       path_in("empty", "train-images-idx3-ubyte[.gz]"));
    check_usage_prefix(RUN("train", "--data", "cifar10", "--data-dir", path_in("empty", NULL)),
                       "tessera: %s: No such file or directory; download the CIFAR-10 binary "
                       "version (cifar-10-binary.tar.gz from ",
                       path_in("empty", "data_batch_1.bin"));
    check_usage_error(
        RUN("train", "--data", "csv", "--data-dir", path_in("empty", "x.csv")),
        "tessera: --data-dir: '%s': No such file or directory (csv: a .csv file, or a "
        "folder with train.csv and test.csv)\n",
        path_in("empty", "x.csv"));
    check_usage_error(RUN("train", "--data", "mnist"),
                      "tessera: no data: 'data/mnist': No such file or directory (it should hold "
                      "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])\n");
    /* Fashion-MNIST's default folder absent: the message says how to install it */
    {
        const char *argv[] = {TS_TESSERA_NODATA_BIN, "train", NULL};
        check_usage_error(run_argv(NULL, argv),
                          "tessera: no Fashion-MNIST in /nonexistent/share/datasets/fashion-mnist: "
                          "install Debian's dataset-fashion-mnist (sudo apt-get install "
                          "dataset-fashion-mnist, or make deps) or pass --data-dir DIR\n");
    }
    /* the lenet model of a checkpoint trained as an mlp: refused, the checkpoint untouched */
}

static void check_training_output(const result *r, const char *dev) {
    check_clean_exit(r);
    CHECK(r->out && strstr(r->out, "MLP (101770 parameters) on MNIST (512 train / 128 test) on "));
    CHECK(r->out && strstr(r->out, dev));
    epoch_line e[4];
    int n = parse_epochs(r->out, e, 4);
    CHECK_EQ(n, 2);
    if (n != 2) return;
    CHECK(e[0].epoch == 1 && e[1].epoch == 2 && e[0].epochs == 2);
    /* from chance (ln 10 = 2.30) down, and the data is easy */
    CHECK(e[0].train_loss < 2.3 && e[1].train_loss < e[0].train_loss);
    CHECK(e[1].test_loss < e[0].test_loss);
    CHECK(e[1].test_acc >= 0.9);
    CHECK(e[0].secs >= 0 && e[1].secs >= 0);
    CHECK_NEAR(final_accuracy(r->out), e[1].test_acc, 1e-9);
    CHECK_EQ(count_lines(r->out), 5); /* two header lines, two epochs, the final accuracy */
}

static void test_train_cpu_and_sim(void) {
    result r = RUN("train", "--model", "mlp", DATA, "--device", "cpu", "--progress", "none",
                   "--checkpoint", path_in("cpu", NULL), "--log", path_in("cpu", "log"));
    check_training_output(&r, "cpu");
    double printed = final_accuracy(r.out);
    result_free(&r);
    /* the printed accuracy is that of the saved weights, recomputed here independently */
    double ref = mlp_reference_accuracy(path_in("cpu", "model.safetensors"));
    CHECK_NEAR(ref, printed, 1.5 / NTEST);
    CHECK_OK();

    /* --log: every epoch's scalars */
    char *log = slurp(path_in("cpu", "log/metrics.jsonl"), NULL);
    const char *tags[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy", "\"lr\""};
    for (int i = 0; i < 5; i++) CHECK(log && strstr(log, tags[i]));
    free(log);
    DIR *d = opendir(path_in("cpu", "log"));
    bool events = false;
    struct dirent *e;
    while (d && (e = readdir(d))) events |= !strncmp(e->d_name, "events.out.tfevents.", 20);
    if (d) closedir(d);
    CHECK(events);

    /* eval of the checkpoint prints the same accuracy */
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("cpu", NULL));
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - printed) < 1e-9);
    result_free(&r);

    /* sim:0 runs the same arithmetic: the same weights to the bit */
    r = RUN("train", "--model", "mlp", DATA, "--device", "sim:0", "--progress", "none",
            "--checkpoint", path_in("sim", NULL), "--workers", "0");
    check_training_output(&r, "sim:0");
    result_free(&r);
    CHECK(same_file(path_in("cpu", "model.safetensors"), path_in("sim", "model.safetensors")));

    /* LeNet-5 and SimpleCNN build and train on the same images */
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--progress", "lines");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "LeNet-5 (61706 parameters)"));
    epoch_line el;
    CHECK_EQ(parse_epochs(r.out, &el, 1), 1);
    result_free(&r);
    r = RUN("train", "--model", "simplecnn", DATA, "--epochs", "1", "--device", "sim:1",
            "--batch-size", "128", "--optimizer", "adam");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "Adam lr 0.001"));
    result_free(&r);

    /* a checkpoint of another model: one line, status 2 */
    check_usage_prefix(
        RUN("train", "--model", "lenet", DATA, "--checkpoint", path_in("cpu", NULL), "--resume"),
        "tessera: --resume: load_state_dict: Error(s) in loading state_dict for LeNet5: Missing "
        "key(s) in state_dict: \"conv1.weight\", \"conv1.bias\", \"conv2.weight\"");
    check_usage_error(RUN("train", "--model", "mlp", DATA, "--checkpoint", path_in("cpu", NULL),
                          "--resume", "--batch-size", "100"),
                      "tessera: --resume: %s was saved at step 16 by a run with 8 batches an "
                      "epoch, this one has 6: resume with the data, --batch-size and number of "
                      "processes it was trained with\n",
                      path_in("cpu", "latest.safetensors"));
}

/* --devices (data parallel) and --amp (autocast, grad scaling for float16) */
static void test_parallel_and_amp(void) {
    check_usage_error(RUN("train", "--devices", "sim:0,sim:0"),
                      "tessera: --devices: sim:0 appears twice\n");
    check_usage_error(RUN("train", "--devices", "sim:0,,sim:1"),
                      "tessera: --devices: expected a comma-separated list such as sim:0,sim:1, "
                      "got 'sim:0,,sim:1'\n");
    check_usage_error(RUN("train", "--devices", "sim:0,gpu"),
                      "tessera: --devices: expected cpu, cuda, cuda:N or sim:N, got 'gpu'\n");
    check_usage_error(RUN("train", "--device", "cpu", "--devices", "sim:0,sim:1"),
                      "tessera: --devices: give either --device or --devices, not both\n");
    check_usage_error(RUN("train", "--amp-dtype", "f16"),
                      "tessera: --amp-dtype: only with --amp\n");
    check_usage_error(RUN("train", "--amp", "--amp-dtype", "f32"),
                      "tessera: --amp-dtype: expected bf16 or f16, got 'f32'\n");
    check_usage_error(RUN("eval", "--devices", "sim:0,sim:1", "--checkpoint", tmp),
                      "tessera: --devices: not an option of 'tessera eval' (see tessera --help)\n");

    /* data parallel over two sim devices trains as well as one device, and its checkpoint holds
     * the plain model: a single-device eval loads it */
    result r = RUN("train", "--model", "mlp", DATA, "--devices", "sim:0,sim:1", "--progress",
                   "none", "--checkpoint", path_in("dp", NULL));
    check_training_output(&r, "on sim:0,sim:1 (data parallel)");
    double printed = final_accuracy(r.out);
    result_free(&r);
    CHECK_NEAR(mlp_reference_accuracy(path_in("dp", "model.safetensors")), printed, 1.5 / NTEST);
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("dp", NULL), "--device",
            "sim:1");
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - printed) < 1e-9);
    result_free(&r);

    /* bfloat16 autocast on sim:0 (no scaler), and float16 with grad scaling on cpu whose scale
     * goes into the checkpoint */
    r = RUN("train", "--model", "mlp", DATA, "--device", "sim:0", "--amp", "--progress", "none");
    check_training_output(&r, "on sim:0, mixed precision bfloat16\n");
    result_free(&r);
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--amp", "--amp-dtype", "f16",
            "--devices", "sim:0,sim:1", "--progress", "none", "--checkpoint", path_in("amp", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(data parallel), mixed precision float16 with grad scaling"));
    result_free(&r);
    ts_tensor_list sd = {0};
    ts_safetensors_load(path_in("amp", "latest.safetensors"), ts_cpu(), &sd);
    CHECK_OK();
    ts_tensor *scale = ts_tensor_list_get(&sd, "scaler.scale");
    CHECK(scale != NULL);
    if (scale) CHECK(ts_item(scale) > 0 && ts_item(scale) <= 65536.0);
    CHECK(ts_tensor_list_get(&sd, "model.conv1.weight") != NULL);
    ts_tensor_list_free(&sd);
    /* and resuming restores it */
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--amp", "--amp-dtype", "f16",
            "--progress", "none", "--checkpoint", path_in("amp", NULL), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "resumed from"));
    result_free(&r);
}

static void test_devices(void) {
    result r = RUN_ENV("TS_SIM_DEVICES=2", "devices");
    check_clean_exit(&r);
    CHECK(r.out && !strncmp(r.out, "cpu ", 4) && strstr(r.out, "GiB total"));
    CHECK(r.out && strstr(r.out, "\nsim:0 ") && strstr(r.out, "\nsim:1 ") &&
          !strstr(r.out, "sim:2"));
    result_free(&r);
}

/* Killed by SIGKILL in epoch 2, resumed: the final checkpoint equals an uninterrupted run's, byte
 * for byte (weights, optimizer state, step, RNG state), whatever the number of workers. */
static void test_resume(void) {
#define RUN3(dir, workers)                                                                         \
    "train", "--model", "mlp", DATA, "--epochs", "3", "--seed", "7", "--progress", "none",         \
        "--checkpoint", path_in(dir, NULL), "--workers", workers
    result r = RUN(RUN3("full", "2"));
    check_clean_exit(&r);
    result_free(&r);

    /* 8 batches an epoch: the 12th is in the middle of epoch 2 */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=12", RUN3("killed", "1"));
    CHECK(killed(&r));
    epoch_line e[3];
    CHECK_EQ(parse_epochs(r.out, e, 3), 1);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("killed", "latest.safetensors")), 8);
    CHECK(
        !same_file(path_in("full", "latest.safetensors"), path_in("killed", "latest.safetensors")));

    r = RUN(RUN3("killed", "0"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 8: epoch 2, batch 0"));
    CHECK_EQ(parse_epochs(r.out, e, 3), 2);
    CHECK(e[0].epoch == 2 && e[1].epoch == 3);
    result_free(&r);
    CHECK(
        same_file(path_in("full", "latest.safetensors"), path_in("killed", "latest.safetensors")));
    CHECK(same_file(path_in("full", "model.safetensors"), path_in("killed", "model.safetensors")));

    /* killed while writing epoch 2's checkpoint: epoch 1's stays whole and loadable */
    r = RUN_ENV("TS_TRAIN_KILL_IN_SAVE=2", RUN3("midsave", "2"));
    CHECK(killed(&r));
    CHECK(r.out && strstr(r.out, "epoch 2/3"));
    result_free(&r);
    CHECK(has_tmp_file(path_in("midsave", NULL))); /* the cut-short temporary file */
    CHECK_EQ(checkpoint_step(path_in("midsave", "latest.safetensors")), 8);
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("midsave", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(step 8)"));
    result_free(&r);
    r = RUN(RUN3("midsave", "2"), "--resume");
    check_clean_exit(&r);
    result_free(&r);
    CHECK(!has_tmp_file(path_in("midsave", NULL)));
    CHECK(
        same_file(path_in("full", "latest.safetensors"), path_in("midsave", "latest.safetensors")));

    /* resuming a finished run trains nothing and reports the accuracy */
    r = RUN(RUN3("full", "2"), "--resume");
    check_clean_exit(&r);
    CHECK_EQ(parse_epochs(r.out, e, 3), 0);
    CHECK(final_accuracy(r.out) >= 0.9);
    result_free(&r);
#undef RUN3
}

/* largest |a - b| / max |b| over every tensor of two safetensors files (INFINITY when the names
 * or shapes differ) */
static double weights_rel_diff(const char *a, const char *b) {
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

/* --max-steps stops at the step (also across a resume); --checkpoint-every saves mid-epoch, and a
 * run killed after such a save and resumed ends with the uninterrupted run's files, byte for byte.
 */
static void test_max_steps_and_midepoch_resume(void) {
#define RUNS(dir)                                                                                  \
    "train", "--model", "mlp", DATA, "--seed", "5", "--progress", "none", "--max-steps", "20",     \
        "--checkpoint-every", "3", "--checkpoint", path_in(dir, NULL)
    result r = RUN(RUNS("steps_full"));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "stopped after step 20 (--max-steps 20)"));
    CHECK(r.out && strstr(r.out, "3 epochs (at most 20 steps)")); /* 8 batches an epoch */
    epoch_line e[4];
    CHECK_EQ(parse_epochs(r.out, e, 4), 3);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_full", "latest.safetensors")), 20);

    /* killed after batch 14: the last save was the mid-epoch one at step 12 (epoch 2, batch 4) */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=14", RUNS("steps_cut"));
    CHECK(killed(&r));
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_cut", "latest.safetensors")), 12);
    r = RUN(RUNS("steps_cut"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 12: epoch 2, batch 4"));
    CHECK(r.out && strstr(r.out, "stopped after step 20"));
    result_free(&r);
    CHECK(same_file(path_in("steps_full", "latest.safetensors"),
                    path_in("steps_cut", "latest.safetensors")));
    CHECK(same_file(path_in("steps_full", "model.safetensors"),
                    path_in("steps_cut", "model.safetensors")));
    /* a run already at its limit trains nothing more */
    r = RUN(RUNS("steps_full"), "--resume");
    check_clean_exit(&r);
    CHECK_EQ(parse_epochs(r.out, e, 4), 0);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_full", "latest.safetensors")), 20);
#undef RUNS
    check_usage_error(RUN("train", "--max-steps", "0"),
                      "tessera: --max-steps: expected a positive integer, got '0'\n");
    check_usage_error(RUN("train", "--max-steps", "ten"),
                      "tessera: --max-steps: expected a positive integer, got 'ten'\n");
    check_usage_error(RUN("train", "--checkpoint-every", "5"),
                      "tessera: --checkpoint-every: needs --checkpoint DIR\n");
}

#ifdef TS_MPIEXEC
/* The trainer under mpiexec: DistributedDataParallel over 2 ranks with --batch-size 32 ends where
 * one process with --batch-size 64 does (the same global batches, averaged); only rank 0 prints
 * and writes; a killed 2-rank run resumed ends with the uninterrupted run's checkpoint, byte for
 * byte. */
static result run_mpi(const char *env, int np, const char *const *args) {
    char nps[8];
    snprintf(nps, sizeof nps, "%d", np);
    const char *argv[80] = {TS_MPIEXEC, "-np", nps, "--oversubscribe", "--bind-to", "none"};
    int n = 6;
    if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    argv[n++] = TS_TESSERA_BIN;
    for (int i = 0; args[i] && n < 79; i++) argv[n++] = args[i];
    argv[n] = NULL;
    const char *envs[] = {"OMP_NUM_THREADS=1", env, NULL};
    return run_argv(envs, argv);
}
#define RUN_MPI(env, np, ...) run_mpi(env, np, (const char *const[]){__VA_ARGS__, NULL})

static void test_distributed(void) {
#define RUND(dir, bs)                                                                              \
    "train", "--model", "mlp", DATA, "--seed", "3", "--progress", "lines", "--batch-size", bs,     \
        "--max-steps", "12", "--schedule", "constant", "--checkpoint", path_in(dir, NULL)
    result r = RUN(RUND("one", "64"), "--threads", "1");
    check_clean_exit(&r);
    result_free(&r);
    r = RUN_MPI(NULL, 2, RUND("two", "32"));
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "batch 32 per rank x 2 ranks = global batch 64"));
    CHECK(r.out && strstr(r.out, "world 2, rank 0"));
    /* rank 0 alone prints: one header, one final line */
    int finals = 0;
    for (const char *p = r.out; p && (p = strstr(p, "test accuracy:")); p++) finals++;
    CHECK_EQ(finals, 1);
    if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
    result_free(&r);
    /* float32 sums in another order (two halves of 32 rows, then their average): a few ulps per
     * step over 12 steps */
    double d =
        weights_rel_diff(path_in("two", "model.safetensors"), path_in("one", "model.safetensors"));
    if (!(d <= 1e-5)) fprintf(stderr, "2 ranks vs one process: %g relative\n", d);
    CHECK(d <= 1e-5);

    /* killed (every rank after its 7th batch, past the mid-epoch save at step 6 of an epoch of
     * 8), resumed */
    r = RUN_MPI(NULL, 2, RUND("dfull", "32"), "--checkpoint-every", "3");
    CHECK_EQ(exit_code(&r), 0);
    result_free(&r);
    r = RUN_MPI("TS_TRAIN_KILL_AFTER_BATCHES=7", 2, RUND("dcut", "32"), "--checkpoint-every", "3");
    CHECK(exit_code(&r) != 0);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("dcut", "latest.safetensors")), 6);
    r = RUN_MPI(NULL, 2, RUND("dcut", "32"), "--checkpoint-every", "3", "--resume");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "at step 6: epoch 1, batch 6"));
    result_free(&r);
    CHECK(same_file(path_in("dfull", "latest.safetensors"), path_in("dcut", "latest.safetensors")));
    CHECK(same_file(path_in("dfull", "model.safetensors"), path_in("dcut", "model.safetensors")));

    /* `tessera devices` under the launcher shows the world */
    r = RUN_MPI(NULL, 2, "devices");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "distributed: world 2, rank 0"));
    result_free(&r);
#undef RUND
}
#endif

/* A CSV file: class k has feature a near 10k and b near 100 - 50k, on very different scales
 * (the trainer standardises them), with a noise column and the target in the middle. */
static void test_csv(void) {
    FILE *f = fopen(path_in("toy.csv", NULL), "w");
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
    result r = RUN("train", "--model", "mlp", "--data", "csv", "--data-dir",
                   path_in("toy.csv", NULL), "--csv-target", "label", "--epochs", "4",
                   "--batch-size", "16", "--checkpoint", path_in("csvck", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(160 train / 40 test)"));
    double acc = final_accuracy(r.out);
    CHECK(acc >= 0.9);
    result_free(&r);
    r = RUN("eval", "--model", "mlp", "--data", "csv", "--data-dir", path_in("toy.csv", NULL),
            "--csv-target", "2", "--checkpoint", path_in("csvck", "latest.safetensors"));
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - acc) < 1e-9);
    result_free(&r);
    check_usage_error(RUN("train", "--model", "mlp", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "nope"),
                      "tessera: %s: no column named 'nope' in the header (4 columns)\n",
                      path_in("toy.csv", NULL));
    check_usage_error(RUN("train", "--model", "lenet", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "label"),
                      "tessera: --model lenet: needs image data; use --model mlp for --data csv\n");
}

/* --model gpt on --data text: a corpus whose next byte follows from the last one ("abcdefgh"
 * repeated) is learnt well below the unigram model's 3 bits per byte, generate continues a prompt,
 * --grad-accum of two half batches equals the whole batch, --time-limit stops, and the mistakes. */
static void test_text_gpt(void) {
    FILE *f = fopen(path_in("abc.txt", NULL), "w");
    for (int i = 0; i < 1500; i++) fputs("abcdefgh", f);
    fclose(f);
#define GPT                                                                                        \
    "train", "--data", "text", "--data-dir", path_in("abc.txt", NULL), "--context", "16",          \
        "--layers", "1", "--heads", "2", "--dim", "32", "--batch-size", "16", "--progress", "none"
    result r = RUN(GPT, "--max-steps", "60", "--warmup", "5", "--lr", "0.01", "--checkpoint",
                   path_in("gpt", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "GPT (") && strstr(r.out, "AdamW lr 0.01 weight decay 0.1"));
    /* every training window holds two whole cycles of the 8 letters: exactly 3 bits */
    CHECK(r.out && strstr(r.out, "a unigram model of the training bytes has 3.000 bits per byte"));
    const char *p = NULL; /* the last epoch's */
    for (const char *s = r.out; s && (s = strstr(s, "val loss ")); s++) p = s;
    double val_loss = p ? strtod(p + 9, NULL) : 99;
    const char *q = p ? strstr(p, "(") : NULL;
    double bpb = q ? strtod(q + 1, NULL) : 99;
    CHECK(bpb < 1.0); /* a third of the unigram model's bits, at most */
    CHECK(fabs(bpb - val_loss / log(2.0)) < 2e-3);
    if (bpb >= 1.0) fprintf(stderr, "  gpt output: %s", r.out ? r.out : "");
    result_free(&r);
    /* greedy continuation of "abc" follows the cycle */
    r = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "abc", "--tokens", "13",
            "--greedy");
    check_clean_exit(&r);
    CHECK(r.out && !strcmp(r.out, "abcdefghabcdefgh\n"));
    if (r.out && strcmp(r.out, "abcdefghabcdefgh\n")) fprintf(stderr, "  generated: %s", r.out);
    result_free(&r);
    /* sampled with a seed: the same text twice, 20 bytes after the prompt */
    r = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "h", "--tokens", "20",
            "--top-k", "3", "--temperature", "0.8", "--seed", "4");
    result r2 = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "h", "--tokens",
                    "20", "--top-k", "3", "--temperature", "0.8", "--seed", "4");
    check_clean_exit(&r);
    CHECK(r.out && r2.out && strlen(r.out) == 22 && !strcmp(r.out, r2.out));
    result_free(&r);
    result_free(&r2);
    r = RUN("eval", "--data", "text", "--data-dir", path_in("abc.txt", NULL), "--context", "16",
            "--layers", "1", "--heads", "2", "--dim", "32", "--checkpoint", path_in("gpt", NULL));
    check_clean_exit(&r);
    p = r.out ? strstr(r.out, "val loss ") : NULL;
    CHECK(p && fabs(strtod(p + 9, NULL) - val_loss) < 1e-4);
    result_free(&r);

    /* two accumulated half batches make the whole batch's step (constant lr, SGD, an MLP) */
    r = RUN("train", "--model", "mlp", DATA, "--schedule", "constant", "--progress", "none",
            "--batch-size", "16", "--max-steps", "4", "--checkpoint", path_in("acc16", NULL));
    check_clean_exit(&r);
    result_free(&r);
    r = RUN("train", "--model", "mlp", DATA, "--schedule", "constant", "--progress", "none",
            "--batch-size", "8", "--grad-accum", "2", "--max-steps", "8", "--checkpoint",
            path_in("acc8", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "batch 8 x 2 accumulated"));
    result_free(&r);
    double d = weights_rel_diff(path_in("acc16", "model.safetensors"),
                                path_in("acc8", "model.safetensors"));
    CHECK(d < 1e-5); /* float32 sums in another order */
    if (!(d < 1e-5)) fprintf(stderr, "  accumulated vs whole batch: %g\n", d);

    r = RUN(GPT, "--time-limit", "0.001", "--label-smoothing", "0.1", "--clip-grad", "1");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "stopped after step 1 (--time-limit 0.001 s)"));
    result_free(&r);
#undef GPT
    check_usage_error(RUN("train", "--model", "gpt"),
                      "tessera: --model gpt: trains on --data text\n");
    check_usage_error(RUN("train", "--data", "text", "--model", "mlp"),
                      "tessera: --data text: needs --model gpt (a language model)\n");
    check_usage_error(RUN("train", "--data", "text", "--dim", "30"),
                      "tessera: --dim 30: must be a multiple of --heads (4)\n");
    check_usage_error(RUN("generate"),
                      "tessera: generate: needs --checkpoint DIR (a gpt trained by tessera)\n");
    check_usage_error(RUN("generate", "--checkpoint", path_in("nothing", NULL)),
                      "tessera: --checkpoint: no model at '%s' (train with --model gpt "
                      "--checkpoint DIR first)\n",
                      path_in("nothing", NULL));
    check_usage_error(RUN("generate", "--checkpoint", path_in("acc16", NULL)),
                      "tessera: --checkpoint: not a gpt (no tok_emb.weight and pos_emb.weight)\n");
    check_usage_error(RUN("train", "--data", "text", "--data-dir", path_in("nothing", NULL)),
                      "tessera: --data-dir: '%s': No such file or directory\n",
                      path_in("nothing", NULL));
    check_usage_error(RUN("train", "--model", "mlp", DATA, "--grad-accum", "2", "--checkpoint",
                          path_in("acc", NULL), "--checkpoint-every", "3"),
                      "tessera: --checkpoint-every 3: must be a multiple of --grad-accum 2\n");
}

/* ------------------------------------------------------------ residual networks */
/* Test loss and accuracy of a saved ResNet-20 on the test images, computed here through the library
 * in eval mode: what the trainer prints must be the eval-mode figures (running statistics), not
 * the batch statistics of train mode. */
static bool resnet_reference(const char *weights, int64_t width, double *loss, double *acc) {
    ts_tensor_list sd = {0};
    ts_module *m = ts_resnet20((ts_resnet_config){.in_channels = 1, .width = width});
    bool ok = m && !ts_safetensors_load(weights, ts_cpu(), &sd) &&
              !ts_module_load_state_dict(m, &sd, true);
    ts_tensor_list_free(&sd);
    static float x[NTEST * SIDE * SIDE];
    for (int i = 0; i < NTEST * SIDE * SIDE; i++) /* --data mnist: MNIST's mean and std */
        x[i] = ((float)test_img[i] / 255.0f - 0.1307f) / 0.3081f;
    int64_t y[NTEST];
    for (int i = 0; i < NTEST; i++) y[i] = test_lab[i];
    ts_scope_begin();
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_tensor *logits =
        ts_forward(m, ts_tensor_f32(TS_SHAPE(NTEST, 1, SIDE, SIDE), x, (ts_opts){0}));
    ts_tensor *target = ts_tensor_i64(TS_SHAPE(NTEST), y, (ts_opts){0});
    ts_no_grad_end();
    *loss = ts_item(ts_cross_entropy(logits, target));
    *acc = ts_item(ts_sum(ts_eq(ts_argmax_dim(logits, 1, false), target))) / NTEST;
    ts_scope_end();
    ts_module_free(m);
    ok &= ts_error() == TS_OK;
    ts_error_clear();
    return ok;
}

/* "test loss L acc A" of the last epoch line */
static double last_test_loss(const char *out) {
    epoch_line e[8];
    int n = parse_epochs(out, e, 8);
    return n ? e[n - 1].test_loss : -1;
}

/* CIFAR-10 binary batches of 32x32 colour images, `per` records each: class k a coloured square. */
static void write_cifar(const char *dir, int per) {
    mkdir(path_in(dir, NULL), 0777);
    const char *names[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    uint32_t seed = 11;
    static uint8_t rec[3073];
    for (int f = 0; f < 6; f++) {
        FILE *fp = fopen(path_in(dir, names[f]), "wb");
        for (int i = 0; i < per; i++) {
            int k = (int)(lcg(&seed) >> 8) % CLASSES;
            rec[0] = (uint8_t)k;
            for (int j = 1; j < 3073; j++) rec[j] = (uint8_t)(lcg(&seed) >> 26);
            for (int r = 4 + (k / 5) * 12; r < 14 + (k / 5) * 12; r++)
                for (int c = 2 + (k % 5) * 6; c < 6 + (k % 5) * 6; c++)
                    rec[1 + (k % 3) * 1024 + r * 32 + c] = 200;
            fwrite(rec, 1, sizeof rec, fp);
        }
        fclose(fp);
    }
}

/* --model resnet20 / resnet18: ResNet defaults (SGD lr 0.1, weight decay 5e-4, batch 128, random
 * crop and flip), BatchNorm in train mode while training (running statistics move) and in eval mode
 * for the test figures (recomputed here from the saved weights), exact resume mid-epoch with the
 * BatchNorm buffers and the augmentation, resnet18 on CIFAR-10 files, and the mistakes. */
static void test_resnet(void) {
#define R20(dir)                                                                                   \
    "train", "--model", "resnet20", "--width", "4", DATA, "--epochs", "2", "--batch-size", "64",   \
        "--seed", "3", "--augment", "on", "--progress", "none", "--checkpoint-every", "4",         \
        "--checkpoint", path_in(dir, NULL)
    result r = RUN(R20("r20"));
    check_clean_exit(&r);
    /* 17326 at 3 input channels (tests/test_golden_resnet.c's r20n) less conv1's 2 x 4 x 9 */
    CHECK(r.out && strstr(r.out, "ResNet-20 (17254 parameters) on MNIST"));
    CHECK(r.out && strstr(r.out, "batch 64, SGD lr 0.1 momentum 0.9 weight decay 0.0005 cosine "
                                 "decay, seed 3, random crop (padding 4) and flip\n"));
    epoch_line e[2];
    CHECK_EQ(parse_epochs(r.out, e, 2), 2);
    double printed_acc = final_accuracy(r.out), printed_loss = last_test_loss(r.out);
    if (exit_code(&r) != 0) fprintf(stderr, "  resnet20: %s", r.out ? r.out : "");
    result_free(&r);
    /* train mode while training: 16 batches counted, running statistics away from 0 and 1 */
    const char *model = path_in("r20", "model.safetensors");
    CHECK_EQ(tensor_i64(model, "layer2.1.bn1.num_batches_tracked"), 16);
    ts_tensor_list sd = {0};
    ts_safetensors_load(model, ts_cpu(), &sd);
    ts_tensor *rv = ts_tensor_list_get(&sd, "layer3.2.bn2.running_var");
    ts_scope_begin();
    CHECK(rv && ts_item(ts_max(ts_abs(ts_sub_scalar(rv, 1)))) > 1e-3);
    ts_scope_end();
    ts_tensor_list_free(&sd);
    CHECK_OK();
    /* eval mode for the test: the figures of the saved weights with their running statistics */
    double ref_loss = -1, ref_acc = -1;
    CHECK(resnet_reference(model, 4, &ref_loss, &ref_acc));
    CHECK_NEAR(printed_loss, ref_loss, 1e-4); /* printed with 4 decimals */
    CHECK_NEAR(printed_acc, ref_acc, 0.5 / NTEST);
    /* eval is not augmented: any --seed gives the trainer's figures */
    for (int i = 0; i < 2; i++) {
        r = RUN("eval", "--model", "resnet20", "--width", "4", DATA, "--seed", i ? "9" : "1",
                "--checkpoint", path_in("r20", NULL));
        check_clean_exit(&r);
        const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
        CHECK(p && fabs(strtod(p + 14, NULL) - printed_acc) < 1e-9);
        CHECK(r.out && strstr(r.out, "ResNet-20 on MNIST"));
        result_free(&r);
    }

    /* killed after batch 13, past the mid-epoch save at step 12 (8 batches an epoch), resumed:
     * the uninterrupted run's files, byte for byte (weights, BatchNorm buffers, momentum) */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=13", R20("r20cut"));
    CHECK(killed(&r));
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("r20cut", "latest.safetensors")), 12);
    r = RUN(R20("r20cut"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 12: epoch 2, batch 4"));
    result_free(&r);
    CHECK(same_file(path_in("r20", "latest.safetensors"), path_in("r20cut", "latest.safetensors")));
    CHECK(same_file(model, path_in("r20cut", "model.safetensors")));
#undef R20

    /* without --augment the ResNets augment CIFAR-10 only: the line says nothing of augmentation
     * on these grey images, nor with --augment off */
    r = RUN("train", "--model", "resnet20", "--width", "4", DATA, "--max-steps", "2", "--progress",
            "none");
    check_clean_exit(&r);
    CHECK(r.out && !strstr(r.out, "random crop") && strstr(r.out, "batch 128,"));
    result_free(&r);
    r = RUN("train", "--model", "resnet20", "--width", "4", DATA, "--max-steps", "2", "--augment",
            "off", "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && !strstr(r.out, "random crop") && strstr(r.out, "batch 128,"));
    result_free(&r);

    /* resnet18 (CIFAR stem) on CIFAR-10 files of 3-channel 32x32 images */
    write_cifar("cifar", 40);
    r = RUN("train", "--model", "resnet18", "--width", "4", "--data", "cifar10", "--data-dir",
            path_in("cifar", NULL), "--max-steps", "3", "--batch-size", "32", "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "ResNet-18 (44622 parameters) on CIFAR-10 (200 train / 40 test)"));
    CHECK(r.out && strstr(r.out, "random crop (padding 4) and flip\n"));
    result_free(&r);

    check_usage_error(RUN("train", "--model", "resnet20", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "label"),
                      "tessera: --model resnet20: needs image data; use --model mlp for --data "
                      "csv\n");
    check_usage_error(RUN("train", "--model", "mlp", "--data", "csv", "--augment", "on"),
                      "tessera: --augment: only for images (--data fashion-mnist, mnist or "
                      "cifar10)\n");
    check_usage_error(RUN("train", "--model", "lenet", "--width", "8"),
                      "tessera: --width: only for --model resnet20 or resnet18\n");
    check_usage_error(RUN("train", "--model", "resnet18", "--augment", "yes"),
                      "tessera: --augment: expected on or off, got 'yes'\n");
    check_usage_error(RUN("train", "--model", "resnet20", "--data", "text"),
                      "tessera: --data text: needs --model gpt (a language model)\n");
    /* a resnet20 checkpoint is not a resnet18 */
    check_usage_prefix(RUN("eval", "--model", "resnet18", "--width", "4", DATA, "--checkpoint",
                           path_in("r20", NULL)),
                       "tessera: load_state_dict: Error(s) in loading state_dict for ResNet: "
                       "Missing key(s) in state_dict: \"layer2.0.downsample.0.weight\"");
}

/* Augmentation reaches the training batches: on the synthetic images a class is a position, and a
 * flip maps classes 0, 1, 5, 6 onto 4, 3, 9, 8 (2 and 7 onto themselves), so an MLP trained on
 * flipped images can tell at most 6 of 10 classes apart; without it, it learns them all. */
static void test_augment_mlp(void) {
    result r = RUN("train", "--model", "mlp", DATA, "--augment", "on", "--epochs", "3",
                   "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "random crop (padding 4) and flip"));
    double acc = final_accuracy(r.out);
    CHECK(acc >= 0 && acc < 0.75);
    if (!(acc < 0.75)) fprintf(stderr, "  mlp with augmentation: %s", r.out ? r.out : "");
    result_free(&r);
    r = RUN("train", "--model", "mlp", DATA, "--augment", "off", "--epochs", "3", "--progress",
            "none");
    check_clean_exit(&r);
    CHECK(final_accuracy(r.out) >= 0.9);
    result_free(&r);
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

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/tessera_trainer_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp)) return ts_test_skip("cannot create a temporary folder");
    mkdir(path_in("data", NULL), 0777);
    mkdir(path_in("empty", NULL), 0777);
    static uint8_t img[NTRAIN * SIDE * SIDE], lab[NTRAIN];
    make_images(img, lab, NTRAIN, 1);
    make_images(test_img, test_lab, NTEST, 2);
    write_idx("train", img, lab, NTRAIN);
    write_idx("t10k", test_img, test_lab, NTEST);

    test_help_and_errors();
    test_devices();
    test_train_cpu_and_sim();
    test_resume();
    test_max_steps_and_midepoch_resume();
#ifdef TS_MPIEXEC
    test_distributed();
#endif
    test_parallel_and_amp();
    test_csv();
    test_text_gpt();
    test_resnet();
    test_augment_mlp();
    remove_tree(tmp);
    return ts_test_finish();
}
