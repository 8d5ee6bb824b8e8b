/* fault_sweep.c — the allocation-failure sweep driver (fault_sweep.h). */
#define _GNU_SOURCE /* dladdr: a failing site is printed as object + offset for addr2line */
#include "fault_sweep.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/fault_alloc.h"
#include "ts_test.h"

int64_t ts_sweep_live_tensors(void) {
    int64_t n = 0;
    ts_mem_stats s;
    if (ts_memory_stats(ts_cpu(), &s) == TS_OK) n += s.live_tensors;
    for (int i = 0; i < ts_device_count(TS_SIM); i++)
        if (ts_memory_stats(ts_sim(i), &s) == TS_OK) n += s.live_tensors;
    ts_error_clear();
    return n;
}

static void print_site(tsi_fault_site site) {
    Dl_info info;
    if (site && dladdr((void *)site, &info) && info.dli_fname)
        fprintf(stderr, "  failed allocation at %s+0x%lx (addr2line -f -e %s 0x%lx)\n",
                info.dli_fname, (unsigned long)(site - (tsi_fault_site)info.dli_fbase),
                info.dli_fname, (unsigned long)(site - (tsi_fault_site)info.dli_fbase));
}

/* An out-of-memory message names the op first: "<op>: ..." */
static bool names_op(const char *msg) {
    const char *colon = strchr(msg, ':');
    return colon && colon > msg && colon[1] == ' ';
}

/* snap's references, taken once: the state after setup and after a fault-free run */
static ts_snapshot ref_before, ref_after;

static void check_state(const ts_sweep_case *c, void *s, bool ok) {
    if (c->snap && (ok || !c->any_state_on_error)) {
        ts_snapshot now = c->snap(s);
        ts_snapshot_check(ok ? "the state after the run" : "the state after a failed run", &now,
                          ok ? &ref_after : &ref_before);
        ts_snapshot_free(&now);
    }
    if (c->check) c->check(s, ok);
}

ts_sweep_stats ts_fault_sweep(const ts_sweep_case *c, int max_points) {
    ts_sweep_stats st = {0};
    if (c->snap) {
        void *s = c->setup();
        ref_before = c->snap(s);
        CHECK(c->run(s));
        ref_after = c->snap(s);
        c->teardown(s);
        CHECK_OK();
    }
    tsi_fault_site sites[1];
    int before = ts_test_failed_count();
    /* debugging: TS_SWEEP_FROM=N starts at point N, TS_SWEEP_VERBOSE=1 names each point */
    const char *from = getenv("TS_SWEEP_FROM"), *verbose = getenv("TS_SWEEP_VERBOSE");
    for (int n = from ? atoi(from) : 1; n <= max_points; n++) {
        if (verbose) fprintf(stderr, "sweep %s: point %d\n", c->name, n);
        int64_t live0 = ts_sweep_live_tensors();
        void *s = c->setup();
        if (!s) {
            CHECK(!"sweep setup failed");
            break;
        }
        ts_fault_alloc_set(n);
        bool ok = c->run(s);
        bool fired = ts_fault_alloc_fired();
        tsi_fault_site failed = 0;
        int n_sites = tsi_fault_alloc_sites(sites, 0, &failed);
        uint64_t count = ts_fault_alloc_count();
        ts_fault_alloc_set(-1);
        int failures = ts_test_failed_count();
        ts_status code = ts_error();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ts_error_message());
        if (!fired) {
            /* the fault-free run: everything succeeds */
            CHECK(ok && code == TS_OK);
            st.allocations = (int64_t)count;
            st.sites = n_sites;
            check_state(c, s, true);
        } else if (ok) {
            CHECK(code == TS_OK);
            st.absorbed++;
            check_state(c, s, true);
        } else {
            st.errors++;
            CHECK(code != TS_OK);
            CHECK(msg[0] != '\0');
            if (code == TS_ERR_OOM) {
                st.oom++;
                if (!names_op(msg)) {
                    fprintf(stderr, "  OOM message without the op: \"%s\"\n", msg);
                    CHECK(names_op(msg));
                }
            }
            ts_error_clear();
            check_state(c, s, false);
            /* after the error is cleared the scenario succeeds */
            bool again = c->run(s);
            CHECK(again && ts_error() == TS_OK);
            check_state(c, s, true);
        }
        if (ts_test_failed_count() != failures)
            fprintf(stderr, "sweep %s: failure at allocation %d (%s%s%s)\n", c->name, n,
                    ts_status_string(code), code ? ": " : "", msg);
        ts_error_clear();
        c->teardown(s);
        int64_t live1 = ts_sweep_live_tensors();
        if (live1 != live0) {
            fprintf(stderr, "sweep %s: allocation %d: %lld tensors leaked\n", c->name, n,
                    (long long)(live1 - live0));
            CHECK(live1 == live0);
        }
        if (ts_test_failed_count() != failures) print_site(failed);
        if (!fired) break;
        if (n == max_points) {
            fprintf(stderr, "sweep %s: still failing after %d points\n", c->name, n);
            CHECK(n < max_points);
        }
    }
    printf("sweep %-24s %5lld allocations from %3d sites: %d errors (%d OOM), %d absorbed%s\n",
           c->name, (long long)st.allocations, st.sites, st.errors, st.oom, st.absorbed,
           ts_test_failed_count() != before ? "  FAILED" : "");
    ts_snapshot_free(&ref_before);
    ts_snapshot_free(&ref_after);
    fflush(stdout);
    return st;
}
