/* test_onnx_backend.c — ONNX's own backend test suite (Debian's libonnx-testdata: the node,
 * pytorch-converted, pytorch-operator and simple suites): every model.onnx is loaded, each
 * test_data_set_N's inputs fed and each output compared with ONNX's backend tolerance (rtol 1e-3,
 * atol 1e-7), on cpu and on sim:0. Prints cases passed, failed and refused at load per suite and
 * per operator. A failure fails the test unless tests/onnx_backend_known.txt names the case with a
 * reason; a listed case that passes fails it too (the list stays exact). So does a case refused at
 * load (TS_ERR_UNSUPPORTED) unless it is listed or the refusal is of a STRING tensor (Tessera has
 * no string dtype): an operator that drops out of the table is a failure, not a refusal.
 * Usage: test_onnx_backend [substring of case names]   env: TS_ONNX_TESTDATA (the data folder),
 * TS_ONNX_KNOWN (its known-failure list), TS_ONNX_DEVICES ("cpu,sim:0"), TS_ONNX_VERBOSE=1. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ts_test.h"

/* paths here are bounded by the test data's layout; truncation would only shorten a message */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"

#define MAX_CASES 2048
#define MAX_OPS   512
#define RTOL      1e-3
#define ATOL      1e-7

static const char *suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
#define N_SUITES  4

typedef struct tally {
    int passed, failed, refused, known;
} tally;

typedef struct op_row {
    char name[64];
    tally t;
} op_row;

static op_row ops[MAX_OPS];
static int n_ops;
static bool verbose;

static tally *op_tally(const char *name) {
    for (int i = 0; i < n_ops; i++)
        if (!strcmp(ops[i].name, name)) return &ops[i].t;
    if (n_ops == MAX_OPS) return NULL;
    snprintf(ops[n_ops].name, sizeof ops[n_ops].name, "%s", name);
    return &ops[n_ops++].t;
}

/* ------------------------------------------------------------------ the known-failure list */
typedef struct known {
    char name[128];
    char device[16]; /* "" = every device */
    bool seen_failing;
    bool used;
} known;
static known known_list[256];
static int n_known;

static void read_known(void) {
    char path[1024];
    const char *env = getenv("TS_ONNX_KNOWN"); /* another data set's list (docs/ONNX.md) */
    if (env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/tests/onnx_backend_known.txt", TS_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f) && n_known < 256) {
        if (line[0] == '#' || line[0] == '\n') continue;
        known *k = &known_list[n_known];
        char dev[64] = "";
        if (sscanf(line, "%127s %63s", k->name, dev) < 1) continue;
        /* "case device: reason" or "case: reason" */
        size_t l = strlen(k->name);
        if (l && k->name[l - 1] == ':')
            k->name[l - 1] = '\0';
        else if (dev[0] && dev[strlen(dev) - 1] == ':') {
            dev[strlen(dev) - 1] = '\0';
            snprintf(k->device, sizeof k->device, "%s", dev);
        }
        n_known++;
    }
    fclose(f);
}

static known *find_known(const char *name, const char *device) {
    for (int i = 0; i < n_known; i++)
        if (!strcmp(known_list[i].name, name) &&
            (!known_list[i].device[0] || !strcmp(known_list[i].device, device)))
            return &known_list[i];
    return NULL;
}

/* ------------------------------------------------------------------ files */
static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return b;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------------ comparing */
static bool compare(ts_tensor *got, ts_tensor *want, char *why, size_t n) {
    if (ts_dtype_of(got) != ts_dtype_of(want)) {
        snprintf(why, n, "dtype %s, expected %s", ts_dtype_name(ts_dtype_of(got)),
                 ts_dtype_name(ts_dtype_of(want)));
        return false;
    }
    ts_shape a = ts_shape_of(got), b = ts_shape_of(want);
    bool same = a.ndim == b.ndim;
    for (int d = 0; same && d < a.ndim; d++) same = a.dims[d] == b.dims[d];
    if (!same) {
        char sa[128], sb[128];
        int la = 0, lb = 0;
        la += snprintf(sa + la, sizeof sa - (size_t)la, "[");
        for (int d = 0; d < a.ndim; d++)
            la += snprintf(sa + la, sizeof sa - (size_t)la, "%s%lld", d ? ", " : "",
                           (long long)a.dims[d]);
        snprintf(sa + la, sizeof sa - (size_t)la, "]");
        lb += snprintf(sb + lb, sizeof sb - (size_t)lb, "[");
        for (int d = 0; d < b.ndim; d++)
            lb += snprintf(sb + lb, sizeof sb - (size_t)lb, "%s%lld", d ? ", " : "",
                           (long long)b.dims[d]);
        snprintf(sb + lb, sizeof sb - (size_t)lb, "]");
        snprintf(why, n, "shape %s, expected %s", sa, sb);
        return false;
    }
    int64_t count = ts_numel(want);
    if (!count) return true;
    ts_tensor *g64 = ts_to_dtype(ts_to(got, ts_cpu()), TS_F64);
    ts_tensor *w64 = ts_to_dtype(want, TS_F64);
    double *gv = malloc((size_t)count * sizeof *gv), *wv = malloc((size_t)count * sizeof *wv);
    bool ok = gv && wv && g64 && w64 &&
              ts_copy_to_host(g64, gv, (size_t)count * sizeof *gv) == TS_OK &&
              ts_copy_to_host(w64, wv, (size_t)count * sizeof *wv) == TS_OK;
    if (!ok) snprintf(why, n, "could not read the output: %s", ts_error_message());
    bool exact = !ts_dtype_is_floating(ts_dtype_of(want));
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; ok && i < count; i++) {
        double x = gv[i], y = wv[i];
        bool good;
        if (isnan(y))
            good = isnan(x);
        else if (isinf(y))
            good = x == y;
        else if (exact)
            good = x == y;
        else
            good = fabs(x - y) <= ATOL + RTOL * fabs(y);
        if (!good) {
            if (first < 0) first = i;
            bad++;
            if (fabs(x - y) > worst || isnan(x)) worst = fabs(x - y);
        }
    }
    if (ok && bad) {
        snprintf(why, n,
                 "%lld of %lld values differ (first [%lld]: %.9g, expected %.9g; max |diff| %.3g)",
                 (long long)bad, (long long)count, (long long)first, gv[first], wv[first], worst);
        ok = false;
    }
    free(gv);
    free(wv);
    return ok;
}

/* ------------------------------------------------------------------ one case */
typedef enum outcome { PASSED, FAILED, REFUSED } outcome;

/* A test data file as a tensor on dev. numpy has no bfloat16, so ONNX's numpy_helper before 1.14
 * (which wrote Debian's data) stored a bfloat16 tensor as its uint16 bit pattern with data_type
 * UINT16; the bits are those of the bfloat16 values (raw_data and int32_data hold both types
 * alike). When the model declares the value BFLOAT16 and the file says UINT16, the file's bits
 * are read as bfloat16; anything else is read as the file says. */
static ts_tensor *load_data(const char *path, ts_device dev, ts_dtype declared) {
    if (declared != TS_BF16) return ts_onnx_tensor_load(path, dev, NULL);
    size_t size;
    uint8_t *data = read_all(path, &size);
    Onnx__TensorProto *tp = data ? onnx__tensor_proto__unpack(NULL, size, data) : NULL;
    free(data);
    if (!tp || tp->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__UINT16) {
        if (tp) onnx__tensor_proto__free_unpacked(tp, NULL);
        return ts_onnx_tensor_load(path, dev, NULL);
    }
    tp->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    ts_tensor *t = tso_tensor_from_proto(tp, NULL, dev, path);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return t ? tsi_own(t) : NULL;
}

/* the dtype the model declares for its input (output) k, TS_DTYPE_DEFAULT when none */
static ts_dtype declared_dtype(ts_module *m, int k, bool output) {
    ts_onnx_value_info vi;
    if (k >= (output ? ts_onnx_num_outputs(m) : ts_onnx_num_inputs(m))) return TS_DTYPE_DEFAULT;
    ts_status st = output ? ts_onnx_output_info(m, k, &vi) : ts_onnx_input_info(m, k, &vi);
    return st == TS_OK ? vi.dtype : TS_DTYPE_DEFAULT;
}

/* A test data file for the model's input (output) k: a SequenceProto or OptionalProto where the
 * model declares a sequence or an optional (the bytes alone do not say which message they are),
 * else a tensor as load_data reads it. */
static ts_tensor *load_value(ts_module *m, int k, bool output, const char *path, ts_device dev) {
    ts_onnx_value_info vi = {0};
    if (k < (output ? ts_onnx_num_outputs(m) : ts_onnx_num_inputs(m)))
        (void)(output ? ts_onnx_output_info(m, k, &vi) : ts_onnx_input_info(m, k, &vi));
    if (vi.kind != TS_ONNX_TENSOR) return tso_value_load(path, vi.kind, vi.dtype, dev);
    return load_data(path, dev, declared_dtype(m, k, output));
}

/* compare() for any value: a sequence or an optional element by element, with the same rules */
static bool compare_value(ts_tensor *got, ts_tensor *want, char *why, size_t n) {
    ts_onnx_kind kind = tso_kind_of(want);
    if (kind == TS_ONNX_TENSOR && tso_kind_of(got) == TS_ONNX_TENSOR)
        return compare(got, want, why, n);
    if (tso_kind_of(got) != kind || tso_seq_length(got) != tso_seq_length(want)) {
        snprintf(why, n, "%s, expected %s", tso_value_desc(got), tso_value_desc(want));
        return false;
    }
    for (int64_t i = 0; i < tso_seq_length(want); i++) {
        char w[768];
        if (!compare_value(tso_seq_item(got, i), tso_seq_item(want, i), w, sizeof w)) {
            snprintf(why, n, "%s element %lld: %s", tso_kind_name(kind), (long long)i, w);
            return false;
        }
    }
    return true;
}

static outcome run_case(const char *dir, ts_device dev, char *why, size_t why_n,
                        const char **case_ops, int n_case_ops, bool *op_refused) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t size;
    uint8_t *data = read_all(path, &size);
    if (!data) {
        snprintf(why, why_n, "cannot read %s", path);
        return FAILED;
    }
    ts_error_clear();
    ts_module *m = ts_onnx_load_buffer(data, size, dir, (ts_onnx_opts){.device = dev});
    free(data);
    if (!m) {
        snprintf(why, why_n, "%s", ts_error_message());
        outcome o = ts_error() == TS_ERR_UNSUPPORTED ? REFUSED : FAILED;
        /* which operators refused: those the table lacks at this opset */
        for (int i = 0; i < n_case_ops; i++)
            op_refused[i] = o == REFUSED && strstr(why, case_ops[i]) != NULL;
        ts_error_clear();
        return o;
    }
    outcome result = PASSED;
    int n_in = ts_onnx_num_inputs(m), n_out = ts_onnx_num_outputs(m);
    int sets = 0;
    for (int s = 0; result == PASSED && s < 64; s++) {
        char set[3072];
        snprintf(set, sizeof set, "%s/test_data_set_%d", dir, s);
        if (!exists(set)) break;
        sets++;
        ts_scope_begin();
        ts_tensor *inputs[64] = {0}, *outputs[64] = {0}, *expected[64] = {0};
        int k_in = 0, k_out = 0;
        for (; k_in < 64; k_in++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", set, k_in);
            if (!exists(path)) break;
            inputs[k_in] = load_value(m, k_in, false, path, dev);
            if (!inputs[k_in]) break;
        }
        for (; k_out < 64; k_out++) {
            snprintf(path, sizeof path, "%s/output_%d.pb", set, k_out);
            if (!exists(path)) break;
            expected[k_out] = load_value(m, k_out, true, path, ts_cpu());
            if (!expected[k_out]) break;
        }
        if (ts_error()) {
            snprintf(why, why_n, "reading the test data: %s", ts_error_message());
            result = ts_error() == TS_ERR_UNSUPPORTED ? REFUSED : FAILED;
        } else if (k_in != n_in || k_out > n_out) {
            snprintf(why, why_n, "the data set has %d inputs and %d outputs, the model %d and %d",
                     k_in, k_out, n_in, n_out);
            result = FAILED;
        } else if (ts_onnx_run(m, n_in, inputs, k_out, outputs) != TS_OK) {
            snprintf(why, why_n, "run: %s", ts_error_message());
            result = FAILED;
        } else {
            for (int o = 0; o < k_out && result == PASSED; o++) {
                char w[1024];
                if (!compare_value(outputs[o], expected[o], w, sizeof w)) {
                    snprintf(why, why_n, "output %d: %s", o, w);
                    result = FAILED;
                }
            }
        }
        ts_error_clear();
        ts_scope_end();
    }
    if (!sets && result == PASSED) {
        snprintf(why, why_n, "no test data");
        result = FAILED;
    }
    ts_module_free(m);
    ts_error_clear();
    return result;
}

/* the operator types a model uses (its main graph's nodes) */
static int model_ops(const char *dir, char names[][64], int max) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t size;
    uint8_t *data = read_all(path, &size);
    if (!data) return 0;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    free(data);
    int n = 0;
    if (mp && mp->graph)
        for (size_t k = 0; k < mp->graph->n_node; k++) {
            const char *op = mp->graph->node[k]->op_type;
            if (!op || (!strcmp(op, "Constant") && mp->graph->n_node > 1)) continue;
            int i = 0;
            while (i < n && strcmp(names[i], op)) i++;
            if (i == n && n < max) snprintf(names[n++], 64, "%s", op);
        }
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    return n;
}

int main(int argc, char **argv) {
    const char *root = getenv("TS_ONNX_TESTDATA");
    if (!root) root = "/usr/share/libonnx-testdata/data";
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/node", root);
    if (!exists(probe))
        return ts_test_skip("ONNX's backend test data is not installed (%s; Debian's "
                            "libonnx-testdata, installed by make deps)",
                            root);
    verbose = getenv("TS_ONNX_VERBOSE") != NULL;
    const char *filter = argc > 1 ? argv[1] : NULL;
    read_known();
    const char *dev_list = getenv("TS_ONNX_DEVICES");
    if (!dev_list) dev_list = "cpu,sim:0";
    char devs_buf[256];
    snprintf(devs_buf, sizeof devs_buf, "%s", dev_list);
    ts_device devs[4];
    char dev_names[4][16];
    int n_devs = 0;
    for (char *tok = strtok(devs_buf, ","); tok && n_devs < 4; tok = strtok(NULL, ",")) {
        if (ts_device_parse(tok, &devs[n_devs]) != TS_OK || !ts_device_is_available(devs[n_devs])) {
            printf("device %s is not available: skipped\n", tok);
            ts_error_clear();
            continue;
        }
        snprintf(dev_names[n_devs], sizeof dev_names[n_devs], "%s", tok);
        n_devs++;
    }
    tally per_suite[N_SUITES][4];
    memset(per_suite, 0, sizeof per_suite);
    int unexpected = 0;
    for (int s = 0; s < N_SUITES; s++) {
        char sdir[2048];
        snprintf(sdir, sizeof sdir, "%s/%s", root, suites[s]);
        DIR *d = opendir(sdir);
        if (!d) continue;
        char *cases[MAX_CASES];
        int n_cases = 0;
        for (struct dirent *e; (e = readdir(d)) && n_cases < MAX_CASES;)
            if (e->d_name[0] != '.') cases[n_cases++] = strdup(e->d_name);
        closedir(d);
        qsort(cases, (size_t)n_cases, sizeof *cases, cmp_str);
        for (int c = 0; c < n_cases; c++) {
            if (filter && !strstr(cases[c], filter)) {
                free(cases[c]);
                continue;
            }
            char dir[3072];
            snprintf(dir, sizeof dir, "%s/%s", sdir, cases[c]);
            char names[32][64];
            const char *case_ops[32];
            int n_case_ops = model_ops(dir, names, 32);
            for (int i = 0; i < n_case_ops; i++) case_ops[i] = names[i];
            for (int v = 0; v < n_devs; v++) {
                char why[2048] = "";
                bool op_refused[32] = {0};
                outcome o =
                    run_case(dir, devs[v], why, sizeof why, case_ops, n_case_ops, op_refused);
                known *k = find_known(cases[c], dev_names[v]);
                tally *st = &per_suite[s][v];
                if (o == PASSED)
                    st->passed++;
                else if (o == REFUSED)
                    st->refused++;
                else if (k)
                    st->known++;
                else
                    st->failed++;
                if (k) {
                    k->used = true;
                    if (o != PASSED) k->seen_failing = true;
                }
                for (int i = 0; i < n_case_ops; i++) {
                    tally *t = op_tally(case_ops[i]);
                    if (!t) continue;
                    if (o == PASSED)
                        t->passed++;
                    else if (o == REFUSED && op_refused[i])
                        t->refused++;
                    else if (o == FAILED)
                        (k ? t->known++ : t->failed++);
                }
                if (o == FAILED && !k) {
                    unexpected++;
                    printf("FAIL %s/%s on %s: %s\n", suites[s], cases[c], dev_names[v], why);
                } else if (o == REFUSED && !k && !strstr(why, "STRING")) {
                    /* only string tensors, which Tessera lacks, may be refused unlisted: an
                     * operator dropped from the table or refused by its check fails here */
                    unexpected++;
                    printf("REFUSED %s/%s on %s: %s\n", suites[s], cases[c], dev_names[v], why);
                } else if (verbose) {
                    printf("%s %s/%s on %s%s%s\n",
                           o == PASSED    ? "pass"
                           : o == REFUSED ? "refused"
                                          : "known",
                           suites[s], cases[c], dev_names[v], why[0] ? ": " : "", why);
                }
            }
            free(cases[c]);
        }
    }
    printf("\n%-20s %-8s %7s %7s %7s %7s\n", "suite", "device", "passed", "failed", "known",
           "refused");
    for (int s = 0; s < N_SUITES; s++)
        for (int v = 0; v < n_devs; v++)
            printf("%-20s %-8s %7d %7d %7d %7d\n", suites[s], dev_names[v], per_suite[s][v].passed,
                   per_suite[s][v].failed, per_suite[s][v].known, per_suite[s][v].refused);
    printf("\nper operator (cases using it, all suites and devices):\n%-28s %7s %7s %7s %7s\n",
           "operator", "passed", "failed", "known", "refused");
    for (int i = 0; i < n_ops; i++)
        for (int j = i + 1; j < n_ops; j++)
            if (strcmp(ops[j].name, ops[i].name) < 0) {
                op_row tmp = ops[i];
                ops[i] = ops[j];
                ops[j] = tmp;
            }
    for (int i = 0; i < n_ops; i++)
        printf("%-28s %7d %7d %7d %7d\n", ops[i].name, ops[i].t.passed, ops[i].t.failed,
               ops[i].t.known, ops[i].t.refused);
    CHECK_EQ(unexpected, 0);
    if (!filter)
        for (int i = 0; i < n_known; i++) {
            if (known_list[i].used && !known_list[i].seen_failing) {
                printf("tests/onnx_backend_known.txt: %s passes now: take it off the list\n",
                       known_list[i].name);
                CHECK(false);
            }
        }
    int total_passed = 0;
    for (int s = 0; s < N_SUITES; s++)
        for (int v = 0; v < n_devs; v++) total_passed += per_suite[s][v].passed;
    CHECK(total_passed > 0);
    return ts_test_finish();
}
#endif
