/* ts_test.h — the tiny assertion layer shared by every test program (no framework, just counters).
 */
#ifndef TS_TEST_H
#define TS_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tessera.h"

/* Every CHECK counts one pass or one failure; failures print file:line and the values. */
void ts_test_record(bool ok);
void ts_test_failf(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ts_test_passed_count(void);
int ts_test_failed_count(void);

/* Prints "N passed, N failed" and returns the process exit code: 0 when nothing failed and at
 * least one check ran (a program that checks nothing fails). A program that exits without calling
 * ts_test_finish or ts_test_skip fails too (an exit-time guard). */
int ts_test_finish(void);
/* Prints "SKIP: <why>" and returns 77, ctest's skip code: `return ts_test_skip("no GPU");`. */
int ts_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CUDA absent. Without a GPU a test skips what needs one; TS_REQUIRE_CUDA=1 (set for runs on GPU
 * machines) turns every such skip into a failure, so a machine whose CUDA cannot start (a driver
 * too old, a broken install) fails loudly instead of passing with nothing run.
 * ts_test_cuda_required: the switch is on. ts_test_no_cuda(what): prints "<what>: CUDA is not
 * available (<reason>)" and, when required, records a failure. ts_test_skip_no_cuda(what): the
 * same, then the exit code: 77 (skipped), or 1 when required. */
bool ts_test_cuda_required(void);
void ts_test_no_cuda(const char *what);
int ts_test_skip_no_cuda(const char *what);

/* The devices a multi-device test runs on (tests/support/test_devices.c): cpu, sim:0 (configured
 * if need be) and cuda:0 when a CUDA device is present (without one: ts_test_no_cuda, a failure
 * under TS_REQUIRE_CUDA=1); prints them once. Returns how many. TS_TEST_ONLY_CUDA=1: cuda:0
 * alone, where there is one (compute-sanitizer runs). */
#define TS_TEST_MAX_DEVICES 3
int ts_test_devices(ts_device *out, int max);

/* Per-ISA runs (tests/CMakeLists.txt sets TS_CPU_ISA and TS_TEST_ISA): prints the vector ISA the
 * CPU kernels use; returns 77 after a SKIP line when the host lacks the ISA the run is for (the
 * cap would only repeat a run of a lower ISA), else 0. */
int ts_test_isa_gate(void);

/* The pending Tessera error, rendered for failure messages ("" when none). */
const char *ts_test_error_str(void);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        bool ts_ok_ = (cond);                                                                      \
        ts_test_record(ts_ok_);                                                                    \
        if (!ts_ok_)                                                                               \
            ts_test_failf(__FILE__, __LINE__, "CHECK(%s) failed%s", #cond, ts_test_error_str());   \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long ts_a_ = (long long)(a), ts_b_ = (long long)(b);                                  \
        ts_test_record(ts_a_ == ts_b_);                                                            \
        if (ts_a_ != ts_b_)                                                                        \
            ts_test_failf(__FILE__, __LINE__, "CHECK_EQ(%s, %s) failed: %lld != %lld%s", #a, #b,   \
                          ts_a_, ts_b_, ts_test_error_str());                                      \
    } while (0)

/* |a - b| <= tol; NaN equals only NaN, infinities equal themselves. */
bool ts_test_near(double a, double b, double tol);
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double ts_a_ = (double)(a), ts_b_ = (double)(b), ts_t_ = (double)(tol);                    \
        bool ts_ok_ = ts_test_near(ts_a_, ts_b_, ts_t_);                                           \
        ts_test_record(ts_ok_);                                                                    \
        if (!ts_ok_)                                                                               \
            ts_test_failf(__FILE__, __LINE__, "CHECK_NEAR(%s, %s, %s) failed: %.17g vs %.17g", #a, \
                          #b, #tol, ts_a_, ts_b_);                                                 \
    } while (0)

#define CHECK_STREQ(a, b)                                                                          \
    do {                                                                                           \
        const char *ts_a_ = (a), *ts_b_ = (b);                                                     \
        bool ts_ok_ = ts_a_ && ts_b_ && strcmp(ts_a_, ts_b_) == 0;                                 \
        ts_test_record(ts_ok_);                                                                    \
        if (!ts_ok_)                                                                               \
            ts_test_failf(__FILE__, __LINE__, "CHECK_STREQ(%s, %s) failed: \"%s\" vs \"%s\"", #a,  \
                          #b, ts_a_ ? ts_a_ : "(null)", ts_b_ ? ts_b_ : "(null)");                 \
    } while (0)

/* No Tessera error pending; on failure prints the message and clears it so later checks run. */
#define CHECK_OK()                                                                                 \
    do {                                                                                           \
        bool ts_ok_ = ts_error() == TS_OK;                                                         \
        ts_test_record(ts_ok_);                                                                    \
        if (!ts_ok_) {                                                                             \
            ts_test_failf(__FILE__, __LINE__, "unexpected error%s", ts_test_error_str());          \
            ts_error_clear();                                                                      \
        }                                                                                          \
    } while (0)

/* The pending error has this code (and is cleared either way). */
#define CHECK_ERR(code)                                                                            \
    do {                                                                                           \
        ts_status ts_got_ = ts_error();                                                            \
        ts_test_record(ts_got_ == (code));                                                         \
        if (ts_got_ != (code))                                                                     \
            ts_test_failf(__FILE__, __LINE__, "expected %s, got %s%s", ts_status_string(code),     \
                          ts_status_string(ts_got_), ts_test_error_str());                         \
        ts_error_clear();                                                                          \
    } while (0)

/* The pending error has this code and its message contains fragment (cleared either way). */
#define CHECK_ERR_HAS(code, fragment)                                                              \
    do {                                                                                           \
        ts_status ts_got_ = ts_error();                                                            \
        const char *ts_msg_ = ts_error_message(), *ts_frag_ = (fragment);                          \
        bool ts_ok_ = ts_got_ == (code) && strstr(ts_msg_, ts_frag_) != NULL;                      \
        ts_test_record(ts_ok_);                                                                    \
        if (!ts_ok_)                                                                               \
            ts_test_failf(__FILE__, __LINE__, "expected %s with \"%s\", got %s: \"%s\"",           \
                          ts_status_string(code), ts_frag_, ts_status_string(ts_got_), ts_msg_);   \
        ts_error_clear();                                                                          \
    } while (0)

#endif /* TS_TEST_H */
