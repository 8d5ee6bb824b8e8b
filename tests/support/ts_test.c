/* ts_test.c — pass/fail counters and reporting behind the CHECK macros of ts_test.h. */
#include "ts_test.h"

#include "backend/cpu/cpu_isa.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

/* atomic so that tests which check from worker threads still count correctly */
static atomic_int passed, failed;

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
    printf("%d passed, %d failed\n", p, f);
    fflush(stdout);
    return f ? 1 : 0;
}

int ts_test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 77;
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
    const ts_cpu_isa host = ts_cpu_isa_host();
    if (want && *want && strcmp(ts_cpu_isa_name(ts_cpu_isa_get()), want) != 0)
        return ts_test_skip("this host's best vector ISA is %s: no %s run", ts_cpu_isa_name(host),
                            want);
    printf("cpu isa: %s (host: %s)\n", ts_cpu_isa_name(ts_cpu_isa_get()), ts_cpu_isa_name(host));
    return 0;
}
