/* test_datasets_csv.c — the CSV dataset on files written here: header detection, the target by
 * index, from the end or by name, regression, delimiters, quotes, CRLF, and every error message. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "ts_test.h"

static char path[64];

static ts_dataset *csv(const char *text, ts_csv_opts o) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    ts_dataset *d = ts_csv_dataset_new(path, o);
    /* the in-memory reader agrees, message for message */
    ts_status st = d ? TS_OK : ts_error();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    ts_error_clear();
    tsi_csv c;
    ts_status st2 = tsi_csv_parse(text, strlen(text), path, &o, &c);
    CHECK_EQ(st2, st);
    CHECK_STREQ(ts_error_message(), msg);
    ts_error_clear();
    tsi_csv_release(&c);
    if (st) tsi_error_set(st, "%s", msg);
    return d;
}

/* Sample i: x equals xs (n floats), y equals the class (or the f32 target when regression). */
static void check_row(ts_dataset *d, int64_t i, int n, const float *xs, double y, bool reg) {
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, i, &s), TS_OK);
    if (!s.x) return;
    CHECK(ts_dtype_of(s.x) == TS_F32 && ts_ndim(s.x) == 1 && ts_size(s.x, 0) == n);
    float v[8];
    CHECK_EQ(ts_copy_to_host(s.x, v, (size_t)n * sizeof(float)), TS_OK);
    for (int k = 0; k < n; k++) CHECK_EQ(v[k], xs[k]);
    if (reg) {
        CHECK(ts_dtype_of(s.y) == TS_F32 && ts_ndim(s.y) == 1 && ts_size(s.y, 0) == 1);
    } else {
        CHECK(ts_dtype_of(s.y) == TS_I64 && ts_ndim(s.y) == 0);
    }
    CHECK_EQ(ts_item(s.y), y);
    ts_release(s.x);
    ts_release(s.y);
}

#define FAIL(text, opts, code, frag)                                                               \
    do {                                                                                           \
        ts_dataset *d_ = csv(text, opts);                                                          \
        bool ok_ = !d_ && ts_error() == (code) && strstr(ts_error_message(), frag);                \
        ts_test_record(ok_);                                                                       \
        if (!ok_)                                                                                  \
            ts_test_failf(__FILE__, __LINE__, "expected %s \"%s\", got %s \"%s\"",                 \
                          ts_status_string(code), frag, ts_status_string(ts_error()),              \
                          ts_error_message());                                                     \
        ts_error_clear();                                                                          \
        ts_dataset_free(d_);                                                                       \
    } while (0)

static void test_ok(void) {
    /* header (not numeric), target last, classes 0..2 */
    ts_dataset *d =
        csv("a,b,label\n0.5,1.25,2\n-3,4e2,0\n\n7,8,1\n", (ts_csv_opts){.target_column = -1});
    CHECK(d && ts_dataset_len(d) == 3 && ts_dataset_num_classes(d) == 3);
    if (d) {
        check_row(d, 0, 2, (float[]){0.5f, 1.25f}, 2, false);
        check_row(d, 1, 2, (float[]){-3, 400}, 0, false);
        check_row(d, 2, 2, (float[]){7, 8}, 1, false);
    }
    ts_dataset_free(d);
    /* by name, quoted header, CRLF, a byte order mark, spaces around cells */
    d = csv("\xEF\xBB\xBF\"the \"\"y\"\"\", f1 ,f2\r\n 4 , 1.5,2.5\r\n1,\"3\",4\r\n",
            (ts_csv_opts){.target_name = "the \"y\""});
    CHECK(d && ts_dataset_len(d) == 2 && ts_dataset_num_classes(d) == 5);
    if (d) {
        check_row(d, 0, 2, (float[]){1.5f, 2.5f}, 4, false);
        check_row(d, 1, 2, (float[]){3, 4}, 1, false);
    }
    ts_dataset_free(d);
    /* no header, target by index, regression, ';' */
    d = csv("1;2.5;3\n4;-0.25;6",
            (ts_csv_opts){.target_column = 1, .regression = true, .delimiter = ';'});
    CHECK(d && ts_dataset_len(d) == 2 && ts_dataset_num_classes(d) == 0);
    if (d) {
        check_row(d, 0, 2, (float[]){1, 3}, 2.5, true);
        check_row(d, 1, 2, (float[]){4, 6}, -0.25, true);
    }
    ts_dataset_free(d);
    /* an all-numeric first line is data; -2 counts from the end; tab-separated */
    d = csv("1\t0\t9\n2\t1\t8\n", (ts_csv_opts){.target_column = -2, .delimiter = '\t'});
    CHECK(d && ts_dataset_len(d) == 2 && ts_dataset_num_classes(d) == 2);
    if (d) check_row(d, 1, 2, (float[]){2, 8}, 1, false);
    ts_dataset_free(d);
    /* no_header: a non-numeric first line is then an error, not a header */
    d = csv("5,1\n6,0\n", (ts_csv_opts){.no_header = true, .target_column = 0});
    CHECK(d && ts_dataset_num_classes(d) == 7);
    if (d) check_row(d, 0, 1, (float[]){1}, 5, false);
    ts_dataset_free(d);
}

static void test_errors(void) {
    char frag[256];
    ts_csv_opts none = {.target_column = -1};
    snprintf(frag, sizeof frag, "%s:3: column 2: 'abc' is not a number", path);
    FAIL("a,b,c\n1,2,3\n4,abc,6\n", none, TS_ERR_FORMAT, frag);
    snprintf(frag, sizeof frag, "%s:4: 2 columns where the first line has 3", path);
    FAIL("a,b,c\n1,2,3\n\n4,5\n", none, TS_ERR_FORMAT, frag);
    FAIL("1,,3\n", (ts_csv_opts){.no_header = true}, TS_ERR_FORMAT, ":1: column 2 is empty");
    snprintf(frag, sizeof frag, "%s:2: column 2 is empty", path);
    FAIL("a,b,c\n1,,3\n", none, TS_ERR_FORMAT, frag);
    snprintf(frag, sizeof frag, "%s:1: column 1: 'x' is not a number", path);
    FAIL("x,1\n2,3\n", (ts_csv_opts){.no_header = true}, TS_ERR_FORMAT, frag);
    /* zero options: the target is column 0 */
    FAIL("a,b\n0.5,1\n", (ts_csv_opts){0}, TS_ERR_FORMAT, ":2: column 1: class '0.5' is not");
    FAIL("a,b\n1,2.5\n", none, TS_ERR_FORMAT,
         ":2: column 2: class '2.5' is not a non-negative integer (set regression for real-valued "
         "targets)");
    FAIL("a,b\n1,-1\n", none, TS_ERR_FORMAT, ":2: column 2: class '-1' is not a non-negative");
    FAIL("a,b\n1,nan\n", none, TS_ERR_FORMAT, "class 'nan' is not a non-negative integer");
    FAIL("a,b\n1,1e9\n", none, TS_ERR_FORMAT, "class '1e9' is too large (at most 16777215)");
    FAIL("a,b,c\n1,2,3\n", (ts_csv_opts){.target_column = 3}, TS_ERR_ARG,
         "target column 3 is out of range for 3 columns (0..2, or -1 for the last)");
    FAIL("a,b,c\n1,2,3\n", (ts_csv_opts){.target_column = -4}, TS_ERR_ARG,
         "target column -4 is out of range");
    FAIL("a,b,c\n1,2,3\n", (ts_csv_opts){.target_name = "label"}, TS_ERR_ARG,
         "no column named 'label' in the header (3 columns)");
    FAIL("1,2,3\n", (ts_csv_opts){.target_name = "label"}, TS_ERR_ARG,
         "target column 'label' asked by name but the file has no header line");
    FAIL("", none, TS_ERR_FORMAT, "no data rows (empty file)");
    FAIL("\n  \n", none, TS_ERR_FORMAT, "no data rows (empty file)");
    FAIL("a,b\n", none, TS_ERR_FORMAT, "no data rows after the header");
    FAIL("a\n1\n", none, TS_ERR_FORMAT,
         ":1: 1 column: a sample needs at least 2 (features and a target)");
    FAIL("\"a,b\n1,2\n", none, TS_ERR_FORMAT, ":1: column 1: unterminated quote");
    FAIL("\"a\"x,b\n1,2\n", none, TS_ERR_FORMAT, ":1: column 1: text after the closing quote");
    FAIL("a,b\n1,2\n", (ts_csv_opts){.delimiter = '.'}, TS_ERR_ARG,
         "delimiter '.' cannot separate numbers");
    CHECK(ts_csv_dataset_new(NULL, none) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_csv_dataset_new("/nonexistent/data.csv", none) == NULL);
    CHECK(strstr(ts_error_message(), "/nonexistent/data.csv: No such file or directory"));
    CHECK_ERR(TS_ERR_IO);
}

int main(void) {
    char dir[] = "/tmp/ts_csv_XXXXXX";
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    snprintf(path, sizeof path, "%s/data.csv", dir);
    ts_mem_stats m0, m1;
    ts_memory_stats(ts_cpu(), &m0);
    test_ok();
    test_errors();
    ts_memory_stats(ts_cpu(), &m1);
    CHECK_EQ(m1.live_tensors, m0.live_tensors); /* every sample was released */
    remove(path);
    rmdir(dir);
    return ts_test_finish();
}
