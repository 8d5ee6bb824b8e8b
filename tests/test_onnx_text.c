/* test_onnx_text.c — ONNX's TfIdfVectorizer (src/onnx/ops_text.c), which the backend suite covers
 * thinly, on one-node models packed with protobuf-c (tests/onnx_support/onnx_op_util.h), on every
 * test device: its modes and skips against onnxruntime's outputs. Then the errors: bad attributes
 * refused at load, float tokens at run time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

/* ------------------------------------------------------------------ TfIdfVectorizer */
static void test_tfidf(ts_device dev) {
    /* weights belong to the pool's n-grams (ONNX: "the i-th element in weights is the weight of
     * the i-th n-gram in pool"), so they move with ngram_indexes' permutation */
    static const tfidf_case cases[] = {
        {"TF", 1, 3, 1, false, true, {2, 0, 1, 0, 1, 3, 1, 2, 1, 0, 1, 2, 0, 1, 1, 2, 0, 1}},
        {"IDF",
         1,
         3,
         1,
         true,
         true,
         {0.5, 0, 2, 0, 0.25, 1.5, 1.25, 0.75, 8, 0, 4, 2, 0, 0.25, 1.5, 1.25, 0, 8}},
        {"TFIDF",
         1,
         3,
         1,
         true,
         true,
         {1, 0, 2, 0, 0.25, 4.5, 1.25, 1.5, 8, 0, 4, 4, 0, 0.25, 1.5, 2.5, 0, 8}},
        {"TF", 2, 2, 2, false, false, {0, 1, 0, 0, 2, 0, 3, 1, 0}},
        {"IDF", 2, 2, 2, false, false, {0, 1, 0, 0, 1, 0, 1, 1, 0}},
        {"TFIDF", 1, 2, 3, false, false, {1, 1, 2, 0, 3, 1, 4, 1, 0}},
        {"TF", 3, 3, 0, false, false, {0, 0, 0, 0, 0, 0, 0, 0, 1}},
    };
    static const int64_t x2[] = {2, 3, 5, 6, 7, 3, 2, 3, 5, 6, 7, 8, 6, 7, 5, 3};
    static const int32_t x1[] = {5, 6, 7, 8, 6, 7, 5, 6, 2, 7, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_scope_begin();
        const tfidf_case *tc = &cases[i];
        ts_module *m = load(tfidf_model(tc), dev);
        ts_tensor *x = tc->batch ? tensor(dev, TS_I64, TS_SHAPE(2, 8), x2)
                                 : tensor(dev, TS_I32, TS_SHAPE(11), x1);
        ts_tensor *y = NULL;
        CHECK(run(m, 1, &x, 1, &y));
        check_values(y, TS_F32, tc->batch ? TS_SHAPE(2, 9) : TS_SHAPE(9), tc->want, NULL, tc->mode);
        ts_module_free(m);
        model_free();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ errors */
static void test_load_errors(void) {
    const tfidf_case tc = {"TF", 1, 3, 0, false, false, {0}};
    model *b = tfidf_model(&tc);
    b->node->attribute[b->node->n_attribute - 1]->n_ints = 8; /* ngram_indexes one short */
    refused(b, TS_ERR_FORMAT, "ngram_indexes has 8 values for 9 n-grams");
    b = tfidf_model(&(tfidf_case){"BM25", 1, 3, 0, false, false, {0}});
    refused(b, TS_ERR_UNSUPPORTED, "mode 'BM25'");
    b = tfidf_model(&(tfidf_case){"TF", 3, 2, 0, false, false, {0}});
    refused(b, TS_ERR_FORMAT, "min_gram_length <= max_gram_length");
    b = tfidf_model(&tc);
    a_floats(b, "weights", 3, tfidf_weights);
    refused(b, TS_ERR_FORMAT, "weights has 3 values for 9 n-grams");
    b = tfidf_model(&tc); /* the unigram 3 twice */
    b->node->attribute[4]->ints[3] = 3;
    refused(b, TS_ERR_FORMAT, "holds a 1-gram twice");
    b = tfidf_model(&tc);
    b->node->attribute[6]->ints[1] = 0; /* two n-grams in column 0 */
    refused(b, TS_ERR_FORMAT, "share an output column");
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev};
    ts_tensor *in[1];
    /* TfIdfVectorizer: float tokens */
    model *b = tfidf_model(&(tfidf_case){"TF", 1, 1, 0, false, false, {0}});
    in[0] = ts_zeros(TS_SHAPE(4), f32);
    fails(b, dev, 1, in, TS_ERR_DTYPE, "X must be int32 or int64");
    ts_scope_end();
}

/* every case on one device */
static void on_device(ts_device dev) {
    test_tfidf(dev);
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
