/* onnx_cmds.c — `tessera run` (an ONNX model on a device: inputs from .npy files or random, outputs
 * printed, saved as .npy and timed) and `tessera info` (what ts_onnx_describe says of a model). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "tessera/placement.h"

#define MAX_IO 256 /* inputs and outputs `tessera run` handles; far above real models */

/* A library error as one line: the user's file, flags or inputs (status 2) unless the machine
 * failed (out of memory, a CUDA error: status 1). */
static int fail_lib(const char *what) {
    ts_status s = ts_error();
    return tcli_fail_ts(s == TS_ERR_OOM || s == TS_ERR_CUDA ? TCLI_FAIL : TCLI_USAGE, what);
}

/* -1 with *m loaded (with the inference rewrites when optimize), or the exit status after the
 * error line */
static int load(const tcli_opts *o, ts_device dev, bool optimize, ts_module **m) {
    *m = ts_onnx_load(o->onnx, (ts_onnx_opts){.device = dev, .optimize = optimize});
    return *m ? -1 : fail_lib(NULL);
}

/* run's rewrites: on (inference) unless --no-optimize, or --grad-output (the gradients of the
 * file's parameters need the file's graph) */
static bool run_optimizes(const tcli_opts *o) { return !o->no_optimize && !o->grad_output; }

int tcli_info(const tcli_opts *o) {
    if (tcli_is_pt(o->onnx)) return tcli_pt_info(o);
    ts_module *m;
    int rc = load(o, ts_cpu(), false, &m);
    if (rc >= 0) return rc;
    char *text = ts_onnx_describe(m);
    rc = TCLI_OK;
    if (text)
        printf("%s\n%s", o->onnx, text);
    else
        rc = tcli_fail_ts(TCLI_FAIL, "info");
    free(text);
    ts_module_free(m);
    fflush(stdout);
    return rc;
}

/* ------------------------------------------------------------------ run */
static void shape_str(char *buf, size_t n, ts_shape s) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s.ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)s.dims[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

/* *t: a random input of the declared type and shape, symbolic dims taking batch: floats N(0, 1),
 * integers in [0, 10), bools 0 or 1; desc says so. -1, or the exit status after the error line. */
static int random_input(const ts_onnx_value_info *vi, int64_t batch, ts_device dev, char *desc,
                        size_t n, ts_tensor **t) {
    if (vi->ndim < 0)
        return tcli_fail(TCLI_USAGE,
                         "input '%s' declares no shape: give it with --input %s=FILE.npy", vi->name,
                         vi->name);
    ts_shape s = {.ndim = vi->ndim};
    for (int d = 0; d < vi->ndim; d++) s.dims[d] = vi->dims[d] < 0 ? batch : vi->dims[d];
    ts_dtype dt = vi->dtype ? vi->dtype : TS_F32;
    ts_opts on = {.device = dev};
    *t = ts_dtype_is_floating(dt) ? ts_randn(s, on) : ts_randint(0, dt == TS_BOOL ? 2 : 10, s, on);
    if (*t && ts_dtype_of(*t) != dt) *t = ts_to_dtype(*t, dt);
    if (!*t) return fail_lib("random input");
    char sh[128];
    shape_str(sh, sizeof sh, s);
    snprintf(desc, n, "random %s %s (%s)", ts_dtype_name(dt), sh,
             ts_dtype_is_floating(dt) ? "N(0, 1)"
             : dt == TS_BOOL          ? "0 or 1"
                                      : "integers in [0, 10)");
    return -1;
}

/* The inputs: --input NAME=FILE.npy where given, else random ones; desc[i] says which (printed
 * once the run succeeded: a mistake prints nothing on stdout). *batch becomes the first input's
 * first dim when a file fills a symbolic one. */
static int make_inputs(const tcli_opts *o, ts_module *m, ts_device dev, int n_in, ts_tensor **in,
                       char (*desc)[160], int64_t *batch) {
    ts_onnx_value_info info[MAX_IO];
    for (int i = 0; i < n_in; i++)
        if (ts_onnx_input_info(m, i, &info[i])) return fail_lib(NULL);
    for (int k = 0; k < o->n_inputs; k++) {
        const char *eq = strchr(o->inputs[k], '=');
        size_t len = (size_t)(eq - o->inputs[k]);
        int i = 0;
        while (i < n_in &&
               (strlen(info[i].name) != len || strncmp(info[i].name, o->inputs[k], len)))
            i++;
        if (i == n_in) {
            char names[512] = "";
            for (int j = 0, l = 0; j < n_in && l < (int)sizeof names; j++)
                l += snprintf(names + l, sizeof names - (size_t)l, "%s%s", j ? ", " : "",
                              info[j].name);
            return tcli_fail(TCLI_USAGE, "--input: the model has no input '%.*s' (its inputs: %s)",
                             (int)len, o->inputs[k], n_in ? names : "none");
        }
        if (in[i]) return tcli_fail(TCLI_USAGE, "--input: '%s' is given twice", info[i].name);
        if (!(in[i] = ts_npy_load(eq + 1, dev))) return fail_lib("--input");
        snprintf(desc[i], sizeof desc[i], "%s", eq + 1);
        if (i == 0 && info[0].ndim > 0 && info[0].dims[0] < 0 && ts_ndim(in[0]) > 0)
            *batch = ts_size(in[0], 0);
    }
    int rc = -1;
    for (int i = 0; i < n_in && rc < 0; i++)
        if (!in[i])
            rc = random_input(&info[i], o->batch ? o->batch : 1, dev, desc[i], sizeof desc[i],
                              &in[i]);
    return rc;
}

/* "float32 [2, 3]  0.1 0.2 0.3 ... (6 values)": the first few values, read on the host. */
static void print_output(const char *name, ts_tensor *t) {
    enum { SHOW = 6 };
    char sh[128];
    shape_str(sh, sizeof sh, ts_shape_of(t));
    int64_t n = ts_numel(t), k = n < SHOW ? n : SHOW;
    double v[SHOW];
    ts_scope_begin();
    ts_tensor *h = ts_narrow(ts_reshape(t, (ts_shape){.ndim = 1, .dims = {n}}), 0, 0, k);
    h = ts_contiguous(ts_to_dtype(ts_to(h, ts_cpu()), TS_F64));
    bool ok = h && ts_copy_to_host(h, v, (size_t)k * sizeof *v) == TS_OK;
    ts_scope_end();
    printf("output %s: %s %s ", name, ts_dtype_name(ts_dtype_of(t)), sh);
    bool fl = ts_dtype_is_floating(ts_dtype_of(t));
    for (int64_t i = 0; ok && i < k; i++) printf(fl ? " %.6g" : " %.0f", v[i]);
    if (!ok) {
        printf(" (values unreadable: %s)", ts_error_message());
        ts_error_clear();
    }
    printf("%s (%lld value%s)\n", n > k ? " ..." : "", (long long)n, n == 1 ? "" : "s");
}

/* An output's name as a file name: characters other than letters, digits, '-', '_' and a '.'
 * after the first become '_'; an empty name or one an earlier output already took gets its
 * index. */
static void safe_name(char *buf, size_t n, const char *name, int index, char (*taken)[128]) {
    size_t len = 0;
    for (const char *c = name; *c && len + 1 < n; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || (*c == '.' && len);
        buf[len++] = ok ? *c : '_';
    }
    buf[len] = '\0';
    bool clash = !len;
    for (int i = 0; i < index; i++) clash = clash || !strcmp(taken[i], buf);
    if (clash) snprintf(buf + len, n - len, "%soutput_%d", len ? "_" : "", index);
}

/* mkdir -p */
static bool make_dir(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return false;
    for (char *p = path + 1;; p++) {
        char c = *p;
        if (c != '/' && c) continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return false;
        *p = c;
        if (!c) break;
    }
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int save_outputs(const char *dir, int n_out, ts_tensor **out, ts_module *m) {
    if (!make_dir(dir))
        return tcli_fail(TCLI_USAGE, "--save: cannot make the folder %s: %s", dir, strerror(errno));
    static char taken[MAX_IO][128];
    for (int i = 0; i < n_out; i++) {
        ts_onnx_value_info vi;
        if (ts_onnx_output_info(m, i, &vi)) return fail_lib(NULL);
        safe_name(taken[i], sizeof taken[i], vi.name, i, taken);
        char path[4400];
        int len = snprintf(path, sizeof path, "%s/%s.npy", dir, taken[i]);
        if (len < 0 || (size_t)len >= sizeof path)
            return tcli_fail(TCLI_USAGE, "--save: the folder's name is too long");
        ts_tensor *t = out[i];
        bool bf16 = ts_dtype_of(t) == TS_BF16; /* NumPy has no bfloat16 */
        if (bf16) t = ts_to_dtype(t, TS_F32);
        if (!t || ts_npy_save(path, t)) return tcli_fail_ts(TCLI_FAIL, "--save");
        printf("saved %s%s\n", path, bf16 ? " (bfloat16 as float32: NumPy has no bfloat16)" : "");
    }
    return -1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The devices a run uses: one, or those --max-memory's plan splits the graph over, in order. */
typedef struct run_devs {
    ts_device d[16];
    int n;
    char text[160]; /* "sim:0" or "sim:0 + sim:1 + cpu" */
} run_devs;

/* One run in a scope of its own, finished on the devices before it returns. */
static bool run_once(ts_module *m, const run_devs *rd, int n_in, ts_tensor **in) {
    ts_scope_begin();
    ts_tensor *out[MAX_IO];
    int n_out = ts_onnx_num_outputs(m);
    bool ok = ts_onnx_run(m, n_in, in, n_out, out) == TS_OK;
    for (int i = 0; ok && i < rd->n; i++)
        if (rd->d[i].type == TS_CUDA) ok = ts_cuda_synchronize(rd->d[i].index) == TS_OK;
    ts_scope_end();
    return ok;
}

/* --bench N: warm-up runs, then N timed ones: latency median and p90, and throughput. */
static int bench(ts_module *m, const run_devs *rd, int n_in, ts_tensor **in, int iters,
                 int64_t batch) {
    enum { WARMUP = 3 };
    double *ms = malloc((size_t)iters * sizeof *ms);
    if (!ms) return tcli_fail(TCLI_FAIL, "--bench: out of memory");
    for (int i = 0; i < WARMUP + iters; i++) {
        double t0 = now_ms();
        if (!run_once(m, rd, n_in, in)) {
            free(ms);
            return tcli_fail_ts(TCLI_FAIL, "--bench");
        }
        if (i >= WARMUP) ms[i - WARMUP] = now_ms() - t0;
    }
    qsort(ms, (size_t)iters, sizeof *ms, cmp_double);
    double median = iters % 2 ? ms[iters / 2] : (ms[iters / 2 - 1] + ms[iters / 2]) / 2;
    int k90 = (iters * 9 + 9) / 10 - 1; /* nearest rank: ceil(0.9 N) - 1 */
    printf("bench: %d runs after %d warm-up on %s: median %.4g ms, p90 %.4g ms, %.4g samples/s "
           "(batch %lld)\n",
           iters, WARMUP, rd->text, median, ms[k90],
           median > 0 ? (double)batch * 1e3 / median : 0.0, (long long)batch);
    free(ms);
    return -1;
}

/* --grad-output NAME=FILE.npy: the gradients of sum(output NAME * g) reach every parameter of the
 * imported model through autograd; with --save each is written as DIR/grad/<parameter>.npy (the
 * state-dict name: tools/onnx_real_models.py --grad compares them with PyTorch's). */
static int grad_output(const tcli_opts *o, ts_module *m, int n_out, ts_tensor **out) {
    const char *eq = strchr(o->grad_output, '=');
    if (!eq || eq == o->grad_output)
        return tcli_fail(TCLI_USAGE, "--grad-output: expected NAME=FILE.npy, got '%s'",
                         o->grad_output);
    int k = -1;
    for (int i = 0; i < n_out && k < 0; i++) {
        ts_onnx_value_info vi;
        if (!ts_onnx_output_info(m, i, &vi) && strlen(vi.name) == (size_t)(eq - o->grad_output) &&
            !strncmp(vi.name, o->grad_output, (size_t)(eq - o->grad_output)))
            k = i;
    }
    if (k < 0)
        return tcli_fail(TCLI_USAGE, "--grad-output: the model has no output '%.*s'",
                         (int)(eq - o->grad_output), o->grad_output);
    ts_tensor *g = ts_npy_load(eq + 1, ts_device_of(out[k]));
    if (g) ts_backward(ts_sum(ts_mul(out[k], g)));
    if (!g || ts_error()) return tcli_fail_ts(TCLI_FAIL, "--grad-output");
    ts_tensor_list params = ts_module_named_parameters(m);
    int rc = -1, saved = 0;
    char dir[4096];
    if (o->save) {
        snprintf(dir, sizeof dir, "%s/grad", o->save);
        if (!make_dir(o->save) || !make_dir(dir))
            rc = tcli_fail(TCLI_USAGE, "--save: cannot make the folder %s: %s", dir,
                           strerror(errno));
    }
    for (int i = 0; rc < 0 && i < params.n; i++) {
        ts_tensor *gr = ts_grad(params.tensors[i]);
        if (!gr || !o->save) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s.npy", dir, params.names[i]);
        if (ts_npy_save(path, gr))
            rc = tcli_fail_ts(TCLI_FAIL, "--save");
        else
            saved++;
    }
    if (rc < 0)
        printf("gradients of sum(%s * g): %d parameters%s%s\n", params.n ? params.names[0] : "",
               saved, o->save ? " saved in " : "", o->save ? dir : "");
    ts_tensor_list_free(&params);
    return rc;
}

/* --max-memory: the model (loaded on the cpu) placed by ts_module_place: its nodes, in execution
 * order, split into runs over the budgeted devices, each node's initializers moved to its run's
 * device (docs/PLACEMENT.md). -1 with rd (the runs' devices: the inputs are made on the
 * first) and *text (the plan, malloc'ed: printed once the run succeeded) set, or the exit status
 * after the error line. */
static int place(const tcli_opts *o, ts_module *m, run_devs *rd, char **text) {
    ts_place_plan plan = {0};
    ts_status st = ts_module_place_str(m, o->max_memory, (ts_place_opts){0}, &plan);
    if (st != TS_OK) {
        ts_place_plan_free(&plan);
        return tcli_fail(st == TS_ERR_OOM ? TCLI_FAIL : TCLI_USAGE, "--max-memory: %s",
                         ts_error_message());
    }
    rd->n = 0;
    size_t len = 0;
    for (int i = 0; i < plan.n_units; i++) {
        if (rd->n && ts_device_equal(rd->d[rd->n - 1], plan.units[i].device)) continue;
        if (rd->n == (int)(sizeof rd->d / sizeof rd->d[0])) break;
        rd->d[rd->n++] = plan.units[i].device;
        len +=
            (size_t)snprintf(rd->text + len, len < sizeof rd->text ? sizeof rd->text - len : 0,
                             "%s%s", rd->n > 1 ? " + " : "", ts_device_str(plan.units[i].device));
    }
    if (!rd->n) { /* a graph without nodes: where its outputs go */
        rd->d[rd->n++] = plan.budgets[0].device;
        snprintf(rd->text, sizeof rd->text, "%s", ts_device_str(rd->d[0]));
    }
    *text = ts_place_plan_str(&plan);
    ts_place_plan_free(&plan);
    return *text ? -1 : tcli_fail(TCLI_FAIL, "--max-memory: %s", ts_error_message());
}

int tcli_run(const tcli_opts *o) {
    ts_device dev = ts_cpu();
    run_devs rd = {.n = 1};
    char *plan = NULL;
    int rc = o->max_memory ? -1 : tcli_resolve_device(o, &dev);
    if (rc >= 0) return rc;
    if (o->threads) ts_set_num_threads(o->threads);
    ts_manual_seed(o->seed);
    ts_module *m;
    if ((rc = load(o, dev, run_optimizes(o), &m)) >= 0) return rc;
    if (o->max_memory && (rc = place(o, m, &rd, &plan)) >= 0) {
        ts_module_free(m);
        return rc;
    }
    if (o->max_memory)
        dev = rd.d[0];
    else
        rd.d[0] = dev, snprintf(rd.text, sizeof rd.text, "%s", ts_device_str(dev));
    int n_in = ts_onnx_num_inputs(m), n_out = ts_onnx_num_outputs(m);
    if (n_in > MAX_IO || n_out > MAX_IO) {
        free(plan);
        ts_module_free(m);
        return tcli_fail(TCLI_USAGE, "%s: %d inputs and %d outputs (tessera run takes %d)", o->onnx,
                         n_in, n_out, MAX_IO);
    }
    ts_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    static char desc[MAX_IO][160];
    int64_t batch = o->batch ? o->batch : 1;
    ts_scope_begin(); /* every tensor of the command, released at its end */
    bool grad = o->grad_output != NULL;
    if (!grad) ts_no_grad_begin();
    rc = make_inputs(o, m, dev, n_in, in, desc, &batch);
    if (rc < 0 && ts_onnx_run(m, n_in, in, n_out, out)) rc = fail_lib(NULL);
    if (rc < 0 && plan) printf("placement (--max-memory):\n%s", plan);
    free(plan);
    if (rc < 0)
        printf("%s on %s, inference rewrites %s\n", o->onnx, rd.text,
               run_optimizes(o) ? "on"
               : o->no_optimize ? "off (--no-optimize)"
                                : "off (--grad-output)");
    for (int i = 0; rc < 0 && i < n_in; i++) {
        ts_onnx_value_info vi;
        if (ts_onnx_input_info(m, i, &vi))
            rc = fail_lib(NULL);
        else
            printf("input %s: %s\n", vi.name, desc[i]);
    }
    for (int i = 0; rc < 0 && i < n_out; i++) {
        ts_onnx_value_info vi;
        if (ts_onnx_output_info(m, i, &vi))
            rc = fail_lib(NULL);
        else
            print_output(vi.name, out[i]);
    }
    if (rc < 0 && o->save) rc = save_outputs(o->save, n_out, out, m);
    if (rc < 0 && grad) rc = grad_output(o, m, n_out, out);
    if (rc < 0 && o->bench) rc = bench(m, &rd, n_in, in, o->bench, batch);
    if (!grad) ts_no_grad_end();
    ts_scope_end();
    ts_module_free(m);
    fflush(stdout);
    return rc < 0 ? TCLI_OK : rc;
}
