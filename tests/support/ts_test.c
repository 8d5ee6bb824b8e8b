/* ts_test.c — pass/fail counters and reporting behind the CHECK macros of ts_test.h, and the guard
 * that fails a test program which checked nothing or never reported. */
#define _POSIX_C_SOURCE 200809L /* _exit */
#include "ts_test.h"

#include "backend/cpu/cpu_isa.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_bridge.h"
#include "tessera.h"

/* atomic so that tests which check from worker threads still count correctly */
static atomic_int passed, failed;
static atomic_bool reported; /* ts_test_finish or ts_test_skip ran */

/* A test program that ends without reporting (main returned 0 early, or never checked through
 * this harness) fails instead of passing unseen. Every test links this file
 * (tests/CMakeLists.txt forces it in), so the guard is always installed. */
static void guard_at_exit(void) {
    if (atomic_load(&reported)) return;
    fprintf(stderr,
            "test program ended without ts_test_finish() or ts_test_skip() (%d passed, %d "
            "failed): counted as a failure\n",
            atomic_load(&passed), atomic_load(&failed));
    fflush(stderr);
    _exit(1);
}
__attribute__((constructor)) static void install_guard(void) { atexit(guard_at_exit); }

/* whether the flags line of /proc/cpuinfo has one of the space-separated flags of `list` (true
 * when it cannot be read: then nothing is skipped) */
static bool host_has_any_flag(const char *list) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return true;
    static char line[16384];
    bool seen = false, has = false;
    while (!seen && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        seen = true;
        for (const char *p = list; *p && !has;) {
            const size_t n = strcspn(p, " ");
            for (const char *q = strchr(line, ':'); q && n && !has; q = strstr(q + 1, " "))
                has = q[1] && !strncmp(q + 1, p, n) && strchr(" \n", q[1 + n]);
            p += n + (p[n] == ' ');
        }
    }
    fclose(f);
    return has || !seen;
}

/* A rerun that changes what only some CPUs have a use for (oneDNN capped below AVX512-BF16 or
 * AMX, Tessera's AMX kernel on every product) names in TS_TEST_HOST_NEEDS the CPU flags that make
 * it differ from the plain run (tests/CMakeLists.txt). On a host with none of them it would run
 * the same code as the plain run again, and skips before main. */
__attribute__((constructor)) static void host_needs_gate(void) {
    const char *need = getenv("TS_TEST_HOST_NEEDS");
    if (!need || !*need || host_has_any_flag(need)) return;
    exit(ts_test_skip("this host has none of the CPU flags \"%s\": the same run as the plain one",
                      need));
}

void ts_test_record(bool ok) { atomic_fetch_add(ok ? &passed : &failed, 1); }

void ts_test_failf(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ts_test_passed_count(void) { return atomic_load(&passed); }
int ts_test_failed_count(void) { return atomic_load(&failed); }

int ts_test_finish(void) {
    int p = atomic_load(&passed), f = atomic_load(&failed);
    atomic_store(&reported, true);
    printf("%d passed, %d failed\n", p, f);
    if (p + f == 0)
        printf("no check ran: a test that checks nothing cannot fail; counted as failed\n");
    fflush(stdout);
    return f || p + f == 0 ? 1 : 0;
}

int ts_test_skip(const char *fmt, ...) {
    atomic_store(&reported, true);
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 77;
}

bool ts_test_cuda_required(void) {
    const char *v = getenv("TS_REQUIRE_CUDA");
    return v && *v && strcmp(v, "0") != 0;
}

void ts_test_no_cuda(const char *what) {
    const bool required = ts_test_cuda_required();
    (void)ts_cuda_is_available(); /* starts the library: the reason is known from here on */
    const char *why = tsc_unavailable_reason();
    if (required) {
        ts_test_record(false);
        printf("FAIL: TS_REQUIRE_CUDA=1, but CUDA is not available (%s): %s\n", why, what);
    } else {
        printf("%s: CUDA is not available (%s)\n", what, why);
    }
    fflush(stdout);
}

int ts_test_skip_no_cuda(const char *what) {
    if (!ts_test_cuda_required()) {
        (void)ts_cuda_is_available();
        return ts_test_skip("%s: CUDA is not available (%s)", what, tsc_unavailable_reason());
    }
    ts_test_no_cuda(what);
    return ts_test_finish();
}

const char *ts_test_error_str(void) {
    static _Thread_local char buf[512];
    if (ts_error() == TS_OK) return "";
    snprintf(buf, sizeof buf, " [pending %s: %s]", ts_status_string(ts_error()),
             ts_error_message());
    return buf;
}

bool ts_test_near(double a, double b, double tol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= tol;
}

int ts_test_isa_gate(void) {
    const char *want = getenv("TS_TEST_ISA");
    const ts_cpu_isa host = tsi_cpu_isa_host();
    if (want && *want && strcmp(tsi_cpu_isa_name(ts_cpu_isa_get()), want) != 0)
        return ts_test_skip("this host's best vector ISA is %s: no %s run", tsi_cpu_isa_name(host),
                            want);
    /* capped at the host's own best ISA: the same kernels as the uncapped run of the same test,
     * which also covers sim and cuda (tests/CMakeLists.txt adds every capped run beside one) */
    if (want && *want && strcmp(tsi_cpu_isa_name(host), want) == 0)
        return ts_test_skip("%s is this host's best vector ISA: the same run as the uncapped one",
                            want);
    printf("cpu isa: %s (host: %s)\n", tsi_cpu_isa_name(ts_cpu_isa_get()), tsi_cpu_isa_name(host));
    return 0;
}
