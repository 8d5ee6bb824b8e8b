/* test_trainer_profile.c — `tessera train --profile DIR --profile-steps A:B` writes a Chrome
 * trace of exactly those steps (each a ProfilerStep#N range with its loader wait and the ops in
 * it), and `tessera profile-view` makes a self-contained HTML page of it; the flags' errors. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_run.h"
#include "ts_test.h"

static void test_trace_of_steps(void) {
    result r =
        RUN("train", "--model", "mlp", DATA, "--device", "sim:0", "--progress", "none", "--workers",
            "0", "--max-steps", "5", "--profile", path_in("prof", NULL), "--profile-steps", "2:3");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "profile of steps 2-3"));
    result_free(&r);
    size_t n = 0;
    char *text = slurp(path_in("prof", "trace.json"), &n);
    CHECK(text != NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    CHECK(j != NULL);
    const cJSON *evs = cJSON_GetObjectItem(j, "traceEvents"), *e;
    int steps[8] = {0}, waits = 0, ops = 0, bwd = 0, other_ranges = 0, h2d = 0, d2h = 0;
    double s2_t0 = 0, s3_t1 = 0;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph"), *name = cJSON_GetObjectItem(e, "name"),
                    *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        const char *nm = name->valuestring, *c = cat->valuestring;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble,
               dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        int k;
        if (!strcmp(c, "user_annotation")) {
            if (sscanf(nm, "ProfilerStep#%d", &k) == 1 && k >= 0 && k < 8) {
                steps[k]++;
                if (k == 2) s2_t0 = ts;
                if (k == 3) s3_t1 = ts + dur;
            } else {
                other_ranges++;
            }
        }
        waits += !strcmp(c, "dataloader");
        ops += !strcmp(c, "cpu_op");
        bwd += !strcmp(c, "backward");
        if (!strcmp(c, "gpu_memcpy")) {
            const cJSON *kind = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "kind");
            const bool to_dev = cJSON_IsString(kind) && !strcmp(kind->valuestring, "HtoD");
            h2d += to_dev, d2h += !to_dev;
        }
    }
    CHECK(steps[2] == 1 && steps[3] == 1);
    CHECK(steps[1] == 0 && steps[4] == 0 && steps[5] == 0);
    CHECK_EQ(other_ranges, 0);
    CHECK_EQ(waits, 2);   /* the loader's wait before each profiled step */
    CHECK_EQ(h2d, 2 * 2); /* each batch's images and labels moved to sim:0 */
    /* the host read of the labels by cross entropy's index check, a device-to-host copy: once a
     * step (the gather and its backward's scatter know the range is checked: core/index_range.c) */
    CHECK_EQ(d2h, 2 * 1);
    CHECK(ops > 10 && bwd > 4);
    CHECK(s2_t0 > 0 && s3_t1 > s2_t0);
    /* every op lies in the two steps */
    int outside = 0;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "cpu_op")) continue;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        outside += ts < s2_t0 || ts > s3_t1;
    }
    CHECK_EQ(outside, 0);
    cJSON_Delete(j);
    free(text);

    r = RUN("profile-view", path_in("prof", "trace.json"), "-o", path_in("prof", "p.html"));
    check_clean_exit(&r);
    result_free(&r);
    char *html = slurp(path_in("prof", "p.html"), &n);
    CHECK(html && strstr(html, "<script id=\"trace\" type=\"application/json\">") &&
          strstr(html, "ProfilerStep#2") && strstr(html, "Transfers") && strstr(html, "</html>"));
    CHECK(html && !strstr(html, "src=\"http") && !strstr(html, "href=\"http"));
    free(html);
}

static void test_errors(void) {
    check_usage_error(RUN("train", "--profile-steps", "1:2"),
                      "tessera: --profile-steps: needs --profile DIR (where the trace goes)\n");
    check_usage_error(RUN("train", "--profile", "x", "--profile-steps", "3:2"),
                      "tessera: --profile-steps: expected A:B with 1 <= A <= B (steps A to B), "
                      "got '3:2'\n");
    check_usage_error(RUN("profile-view", "a.json"),
                      "tessera: profile-view: needs a trace and -o FILE.html (tessera "
                      "profile-view trace.json -o out.html)\n");
    FILE *f = fopen(path_in("prof", "bad.json"), "w");
    CHECK(f != NULL);
    if (f) fputs("{\"traceEvents\": [", f), fclose(f);
    result r = RUN("profile-view", path_in("prof", "bad.json"), "-o", path_in("prof", "bad.html"));
    CHECK_EQ(exit_code(&r), 1);
    CHECK(r.err && strstr(r.err, "is not a Chrome trace"));
    result_free(&r);
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot make a temporary folder");
    test_trace_of_steps();
    test_errors();
    trainer_cleanup();
    return ts_test_finish();
}
