/* test_omp_wait.c — ts_cpu_bounded_spin: with no OpenMP wait setting in the environment the
 * program comes back re-executed with GOMP_SPINCOUNT=1000, which start-up then takes out of the
 * environment again (children see the original); a setting of the user's is left alone and named.
 * ctest runs it plainly and with OMP_WAIT_POLICY=passive (tests/CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

int main(int argc, char **argv) {
    (void)argc;
    /* set only in the re-executed process */
    const bool child = getenv("TS_OMP_SPIN_SET") != NULL;
    const char *pol = getenv("OMP_WAIT_POLICY");
    const bool user = !child && (pol || getenv("GOMP_SPINCOUNT"));
    char user_pol[64] = "";
    if (pol) snprintf(user_pol, sizeof user_pol, "%s", pol);
    ts_cpu_bounded_spin(argv); /* without a setting of the user's: does not come back */
    CHECK(child || user);
    if (child) {
        printf("re-executed with GOMP_SPINCOUNT=%s\n", getenv("GOMP_SPINCOUNT"));
        CHECK(getenv("GOMP_SPINCOUNT") && !strcmp(getenv("GOMP_SPINCOUNT"), "1000"));
    }
    ts_tensor *t = ts_ones(TS_SHAPE(2), (ts_opts){0}); /* starts the library */
    CHECK(t != NULL);
    ts_release(t);
    const char *d = ts_cpu_describe();
    printf("%s\n", d);
    if (child) {
        CHECK(strstr(d, "OpenMP wait GOMP_SPINCOUNT=1000 (set by ts_cpu_bounded_spin)") != NULL);
        CHECK(getenv("GOMP_SPINCOUNT") == NULL); /* children see the original environment */
        CHECK(getenv("TS_OMP_SPIN_SET") == NULL);
    } else {
        char want[96];
        snprintf(want, sizeof want, "OpenMP wait OMP_WAIT_POLICY=%s", user_pol);
        CHECK(!*user_pol || strstr(d, want) != NULL);
        CHECK(!*user_pol ||
              (getenv("OMP_WAIT_POLICY") && !strcmp(getenv("OMP_WAIT_POLICY"), user_pol)));
    }
    CHECK(strstr(d, "vector ISA ") != NULL && strstr(d, " threads") != NULL);
    ts_cpu_bounded_spin(argv); /* a second call changes nothing */
    CHECK(getenv("GOMP_SPINCOUNT") == NULL || user);
    return ts_test_finish();
}
