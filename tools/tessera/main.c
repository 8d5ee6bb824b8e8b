/* main.c — the `tessera` command: subcommand dispatch, error lines and `tessera devices`. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int tcli_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tessera: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

int tcli_fail_ts(int status, const char *what) {
    /* errors are one line: a multi-line message (load_state_dict's list of keys) is joined */
    const char *msg = ts_error_message();
    size_t n = strlen(msg), k = 0;
    char *line = malloc(n + 1);
    if (line) {
        for (size_t i = 0; i < n; i++) {
            bool space = msg[i] == '\n' || msg[i] == '\t' || msg[i] == '\r' || msg[i] == ' ';
            if (!space)
                line[k++] = msg[i];
            else if (k && line[k - 1] != ' ')
                line[k++] = ' ';
        }
        while (k && line[k - 1] == ' ') k--;
        line[k] = 0;
    }
    const char *text = line && *line ? line : *msg ? msg : "failed";
    int rc = what ? tcli_fail(status, "%s: %s", what, text) : tcli_fail(status, "%s", text);
    free(line);
    ts_error_clear();
    return rc;
}

static void print_bytes(char *buf, size_t n, size_t bytes) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static void print_device(ts_device d, const char *note) {
    size_t free_b = 0, total_b = 0;
    ts_mem_stats st = {0};
    char fb[32], tb[32], ab[32], rb[32];
    if (ts_device_memory(d, &free_b, &total_b) || ts_memory_stats(d, &st)) {
        printf("%-8s (memory unknown: %s)\n", ts_device_str(d), ts_error_message());
        ts_error_clear();
        return;
    }
    print_bytes(ab, sizeof ab, st.allocated);
    print_bytes(rb, sizeof rb, st.reserved);
    if (total_b == 0) {
        printf("%-8s memory unlimited, %s allocated, %s reserved%s\n", ts_device_str(d), ab, rb,
               note);
        return;
    }
    print_bytes(fb, sizeof fb, free_b);
    print_bytes(tb, sizeof tb, total_b);
    printf("%-8s memory %s total, %s free, %s allocated, %s reserved%s\n", ts_device_str(d), tb, fb,
           ab, rb, note);
}

/* "cpu: <model>, N cores; vector ISA ..., threads, BLAS, OpenMP wait" */
static void print_cpu(void) {
    char model[128] = "unknown model", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !c) continue;
        snprintf(model, sizeof model, "%s", c + 1 + (c[1] == ' '));
        model[strcspn(model, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
    printf("cpu: %s, %ld cores; %s\n", model, sysconf(_SC_NPROCESSORS_ONLN), ts_cpu_describe());
}

int tcli_devices(const tcli_opts *o) {
    (void)o;
    print_device(ts_cpu(), "");
    print_cpu();
    int nc = ts_device_count(TS_CUDA);
    for (int i = 0; i < nc; i++) print_device(ts_cuda(i), "");
    int ns = ts_device_count(TS_SIM);
    for (int i = 0; i < ns; i++) print_device(ts_sim(i), " (host-simulated)");
    if (nc == 0) printf("(no CUDA device)\n");
    /* under a launcher (mpirun, srun): the world this process belongs to */
    if (ts_dist_init((ts_dist_opts){0}) == TS_OK) {
        if (ts_dist_world_size() > 1) printf("distributed: %s\n", ts_dist_describe());
        ts_dist_finalize();
    }
    if (ns == 0) printf("(simulated devices: set TS_SIM_DEVICES=N to add sim:0..N-1)\n");
    fflush(stdout);
    return ts_error() ? tcli_fail_ts(TCLI_FAIL, "devices") : TCLI_OK;
}

int main(int argc, char **argv) {
    ts_cpu_bounded_spin(argv); /* a shared machine's cores: see docs/USAGE.md, "Threads" */
    if (argc >= 2 && !strcmp(argv[1], "profile-view")) return tcli_profile_view(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "memory-view")) return tcli_memory_view(argc, argv);
    tcli_opts o;
    int rc = tcli_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!strcmp(o.command, "train")) return tcli_train(&o);
    if (!strcmp(o.command, "eval")) return tcli_eval(&o);
    if (!strcmp(o.command, "generate")) return tcli_generate(&o);
    if (!strcmp(o.command, "run")) return tcli_run(&o);
    if (!strcmp(o.command, "info")) return tcli_info(&o);
    if (!strcmp(o.command, "export")) return tcli_export(&o);
    if (!strcmp(o.command, "convert")) return tcli_convert(&o);
    if (!strcmp(o.command, "quantize")) return tcli_quantize(&o);
    return tcli_devices(&o);
}
