/* test_onnx_load.c — the ONNX loader against hostile files: ModelProtos packed here with the
 * generated protobuf-c code (tests/onnx_support/onnx_load_base.h: every prefix of a valid model,
 * bytes overwritten, raw data shorter or longer than its dims, dims that overflow or are negative,
 * rank 9, a cycle, a dangling input, a value written twice, unknown operators, domains and opsets,
 * sub-graphs nested too deep, types Tessera lacks, no graph, buffers that are no model, inputs of
 * the wrong shape, dtype or count at run): each is refused with its error code and a message naming
 * what is wrong, and nothing leaks (the suite runs under ASan + LSan in CI). External data:
 * test_onnx_load_external; TensorProtos: test_onnx_tensor_parse; allocation failures:
 * test_onnx_load_sweep. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "onnx_load_base.h"

/* ------------------------------------------------------------------ cut and damaged files */
/* A loaded damaged model must also run cleanly (or fail cleanly) on x = 1. */
static void try_run(ts_module *m) {
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), *y = NULL;
    if (ts_onnx_num_inputs(m) == 1 && ts_onnx_num_outputs(m) >= 1) ts_onnx_run(m, 1, &x, 1, &y);
    ts_scope_end();
    ts_error_clear();
}

/* A clean refusal: FORMAT or UNSUPPORTED, or an operator's own error (a required input cut out of
 * a constant node, found when it is folded at load) naming the node. */
static bool clean_refusal(ts_status s, const char *msg) {
    if (!msg[0]) return false;
    return s == TS_ERR_FORMAT || s == TS_ERR_UNSUPPORTED ||
           (s != TS_ERR_OOM && s != TS_ERR_STATE && strstr(msg, "onnx node '"));
}

/* Loads each variant of the base model's bytes; counts clean refusals and loads; anything else is
 * a failure. */
static void damaged(const char *what, bool truncate) {
    size_t len;
    const uint8_t *buf = pack(model(base_graph(), OPSET), &len);
    int loaded = 0, refusals = 0, bad = 0;
    for (size_t k = 0; k < len * (truncate ? 1 : 3); k++) {
        size_t n = truncate ? k : len, at = k / 3;
        uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any read past the end */
        memcpy(copy, buf, n);
        static const uint8_t junk[3] = {0xff, 0x00, 0x80};
        if (!truncate) copy[at] = junk[k % 3];
        ts_module *m = ts_onnx_load_buffer(copy, n, NULL, (ts_onnx_opts){0});
        ts_status s = ts_error();
        if (m) {
            loaded++;
            try_run(m);
        } else if (clean_refusal(s, ts_error_message())) {
            refusals++;
        } else if (bad++ < 5) {
            fprintf(stderr, "  %s %zu: %s: %s\n", what, k, ts_status_string(s), ts_error_message());
        }
        ts_module_free(m);
        ts_error_clear();
        free(copy);
    }
    CHECK_EQ(bad, 0);
    CHECK(refusals > 0);
    printf("%s: %d variants of a %zu-byte model: %d refused, %d loaded\n", what,
           loaded + refusals + bad, len, refusals, loaded);
    arena_free();
}

/* ------------------------------------------------------------------ hostile graphs */
static void test_graphs(void) {
    loads("the base model", model(base_graph(), OPSET), NULL);
    refused("no graph", model(NULL, OPSET), NULL, TS_ERR_FORMAT, "the model has no graph");
    {
        Onnx__ModelProto *m = model(base_graph(), OPSET);
        m->n_opset_import = 0;
        refused("no opset", m, NULL, TS_ERR_FORMAT, "imports no opset");
    }
    refused("opset 22", model(base_graph(), 22), NULL, TS_ERR_UNSUPPORTED, "opset 22");
    {
        Onnx__GraphProto *g = base_graph();
        g->node[0]->op_type = str("FooBar");
        refused("unknown operator", model(g, OPSET), NULL, TS_ERR_UNSUPPORTED,
                "node 'add0' (FooBar) at opset 13");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->node[1]->domain = str("com.microsoft");
        refused("unknown domain", model(g, OPSET), NULL, TS_ERR_UNSUPPORTED,
                "node 'relu0' (Relu) is in the operator domain 'com.microsoft'");
    }
    {
        Onnx__GraphProto *g = graph();
        add_input(g, "x", tensor_type(FLOAT, 2, d23));
        node(g, "Relu", "r1", "b", "a");
        node(g, "Relu", "r2", "a", "b");
        add_output(g, "b", NULL);
        refused("a cycle", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "the graph has a cycle through node 'r");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->node[1]->input[0] = str("zz");
        refused("an input nobody produces", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "input 'zz' of node 1 (Relu) is produced by no node");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->output[0]->name = str("nowhere");
        refused("an output nobody produces", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "output 'nowhere' is produced by no node");
    }
    {
        Onnx__GraphProto *g = base_graph();
        node(g, "Relu", "again", "x", "a");
        refused("one value written twice", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "'a' (node output) is assigned twice");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->node[0]->output[0] = str("x");
        refused("a node writes an input", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "'x' (node output) is assigned twice");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->node[0]->attribute[g->node[0]->n_attribute++] = get(sizeof(Onnx__AttributeProto));
        onnx__attribute_proto__init(g->node[0]->attribute[0]);
        refused("an attribute without a name", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "has an attribute without a name");
    }
    {
        Onnx__GraphProto *g = base_graph();
        g->input[0]->type = tensor_type(FLOAT, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 2});
        refused("an input of rank 9", model(g, OPSET), NULL, TS_ERR_UNSUPPORTED,
                "'x' has rank 9; Tessera holds at most 8");
    }
    {
        Onnx__GraphProto *g = base_graph();
        add_input(g, "s", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, (int64_t[]){2}));
        refused("a string input", model(g, OPSET), NULL, TS_ERR_UNSUPPORTED,
                "'s' has element type STRING, which Tessera lacks");
    }
    {
        Onnx__GraphProto *g = base_graph();
        Onnx__TypeProto *tp = get(sizeof *tp);
        onnx__type_proto__init(tp);
        Onnx__TypeProto__Sequence *sq = get(sizeof *sq);
        onnx__type_proto__sequence__init(sq);
        /* a sequence of sequences (a sequence of tensors loads: tests/test_onnx_seq.c) */
        Onnx__TypeProto *inner = get(sizeof *inner);
        onnx__type_proto__init(inner);
        Onnx__TypeProto__Sequence *isq = get(sizeof *isq);
        onnx__type_proto__sequence__init(isq);
        isq->elem_type = tensor_type(FLOAT, 1, (int64_t[]){3});
        inner->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        inner->sequence_type = isq;
        sq->elem_type = inner;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        tp->sequence_type = sq;
        add_input(g, "seq", tp);
        refused("a sequence of sequences", model(g, OPSET), NULL, TS_ERR_UNSUPPORTED,
                "'seq' is a sequence of sequences; Tessera's sequences hold tensors");
    }
}

/* ------------------------------------------------------------------ hostile initializers */
static void test_initializers(void) {
    refused("raw_data too short", with_w(tensor("w", FLOAT, 2, d23, w_vals, 20)), NULL,
            TS_ERR_FORMAT, "tensor 'w' (FLOAT [2, 3]): raw_data holds 20 bytes, its dims need 24");
    float more[7] = {0};
    refused("raw_data too long", with_w(tensor("w", FLOAT, 2, d23, more, sizeof more)), NULL,
            TS_ERR_FORMAT, "raw_data holds 28 bytes, its dims need 24");
    refused("dims past int64",
            with_w(tensor("w", FLOAT, 3, (int64_t[]){1ll << 40, 1ll << 40, 1ll << 40}, w_vals, 24)),
            NULL, TS_ERR_FORMAT, "tensor 'w': the product of its dims overflows");
    refused("a negative dim", with_w(tensor("w", FLOAT, 2, (int64_t[]){-2, -3}, w_vals, 24)), NULL,
            TS_ERR_FORMAT, "tensor 'w' has dim 0 = -2");
    refused("an initializer of rank 9",
            with_w(tensor("w", FLOAT, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 2, 3}, w_vals, 24)), NULL,
            TS_ERR_UNSUPPORTED, "tensor 'w' has rank 9");
    refused("a complex64 initializer",
            with_w(tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, 2, d23, w_vals, 6)), NULL,
            TS_ERR_UNSUPPORTED, "tensor 'w' has element type COMPLEX64, which Tessera lacks");
    refused("an undefined element type", with_w(tensor("w", 0, 2, d23, w_vals, 24)), NULL,
            TS_ERR_FORMAT, "tensor 'w' has element type UNDEFINED");
    {
        Onnx__TensorProto *w = tensor("w", FLOAT, 2, d23, NULL, 0);
        w->n_int64_data = 6;
        w->int64_data = get(6 * sizeof(int64_t));
        refused("floats in int64_data", with_w(w), NULL, TS_ERR_FORMAT,
                "tensor 'w' of type FLOAT stores its values in int64_data");
    }
    {
        Onnx__TensorProto *w = tensor("w", FLOAT, 2, d23, NULL, 0);
        w->n_float_data = 6;
        w->float_data = get(sizeof w_vals);
        memcpy(w->float_data, w_vals, sizeof w_vals);
        loads("float_data", with_w(w), NULL);
    }
    {
        Onnx__GraphProto *g = base_graph();
        add_init(g, tensor("w", FLOAT, 2, d23, w_vals, sizeof w_vals));
        refused("two initializers of one name", model(g, OPSET), NULL, TS_ERR_FORMAT,
                "'w' (initializer) is assigned twice");
    }
}

/* ------------------------------------------------------------------ sub-graphs nested deep
 * Identity nodes each holding the next level as a graph attribute: the loader compiles every graph
 * attribute, so the depth limit is reached whichever control-flow operators exist. */
static Onnx__ModelProto *nested(int depth) {
    Onnx__GraphProto *sub = NULL;
    for (int d = depth; d >= 0; d--) {
        Onnx__GraphProto *g = d ? graph() : base_graph();
        char out[32];
        snprintf(out, sizeof out, "s%d", d);
        Onnx__NodeProto *n = node(g, "Identity", NULL, "x", out);
        if (sub) attr_graph(n, "body", sub);
        if (d) add_output(g, out, NULL);
        sub = g;
    }
    return model(sub, OPSET);
}

/* What a sub-graph reads of its enclosing graph orders its node after the producer, whatever the
 * file's order (an If listed first whose branches read a value computed after it); a sub-graph
 * reading its own node's output is a cycle. */
static void test_subgraph_order(void) {
    Onnx__GraphProto *g = graph();
    add_init(g, tensor("w", FLOAT, 2, d23, w_vals, sizeof w_vals));
    add_input(g, "x", tensor_type(FLOAT, 2, d23));
    Onnx__GraphProto *then = graph(), *other = graph();
    node(then, "Identity", "t", "y", "t_out");
    add_output(then, "t_out", NULL);
    node(other, "Identity", "e", "a", "e_out");
    add_output(other, "e_out", NULL);
    Onnx__NodeProto *n = node(g, "Identity", "reads_itself", "x", "y");
    attr_graph(n, "body", then);
    refused("a sub-graph reads its node", model(g, OPSET), NULL, TS_ERR_FORMAT,
            "the graph has a cycle through node 'reads_itself'");
    if (!tso_find_op("If", OPSET, NULL)) {
        printf("  (If not implemented yet: the If listed first is left out)\n");
        return;
    }
    /* y = If(true) { Relu(a) } else { Identity(a) }, a = x + w, the If first in the file */
    g = graph();
    add_init(g, tensor("w", FLOAT, 2, d23, w_vals, sizeof w_vals));
    add_input(g, "x", tensor_type(FLOAT, 2, d23));
    then = graph();
    other = graph();
    node(then, "Relu", "t", "a", "t_out");
    add_output(then, "t_out", NULL);
    node(other, "Identity", "e", "a", "e_out");
    add_output(other, "e_out", NULL);
    n = node(g, "If", "if", "cond", "y");
    attr_graph(n, "then_branch", then);
    attr_graph(n, "else_branch", other);
    attr(node(g, "Constant", "cond", "", "cond"), "value",
         ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)
        ->t = tensor(NULL, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL, (const uint8_t[]){1}, 1);
    node(g, "Add", "add0", "x,w", "a");
    add_output(g, "y", tensor_type(FLOAT, 2, d23));
    loads("an If before its branches' input", model(g, OPSET), NULL);
}

static void test_nesting(void) {
    loads("sub-graphs nested 16 deep", nested(TSO_MAX_GRAPH_DEPTH), NULL);
    refused("sub-graphs nested 17 deep", nested(TSO_MAX_GRAPH_DEPTH + 1), NULL, TS_ERR_FORMAT,
            "sub-graphs nested deeper than 16");
}

/* ------------------------------------------------------------------ buffers that are no model */
static void test_buffers(void) {
    CHECK(!ts_onnx_load_buffer(NULL, 10, NULL, (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_ARG, "data is NULL");
    CHECK(!ts_onnx_load_buffer("", 0, NULL, (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "the model has no graph");
    static const char junk[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
    CHECK(!ts_onnx_load_buffer(junk, sizeof junk - 1, NULL, (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "the protobuf does not parse");
    CHECK(!ts_onnx_load_buffer(junk, TSO_MAX_FILE_BYTES + 1, NULL, (ts_onnx_opts){0}));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "past protobuf's 2 GiB");
    /* the queries on a module ts_onnx_load did not make */
    ts_module *lin = ts_linear_new(2, 2);
    CHECK(!ts_onnx_is_model(lin));
    CHECK_EQ(ts_onnx_num_inputs(lin), -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "not made by ts_onnx_load");
    ts_tensor *out = NULL;
    CHECK(ts_onnx_run(lin, 0, NULL, 1, &out) == TS_ERR_ARG && !out);
    ts_error_clear();
    CHECK(!ts_onnx_describe(lin));
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(lin);
}

/* Inputs of the wrong shape, dtype or count are refused at run, naming the input. */
static void test_run_checks(void) {
    size_t len;
    Onnx__GraphProto *g = base_graph();
    g->input[0]->type = tensor_type(FLOAT, 2, (int64_t[]){-1, 3});
    const uint8_t *buf = pack(model(g, OPSET), &len);
    ts_module *m = ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){0});
    CHECK(m);
    ts_onnx_value_info vi;
    CHECK(ts_onnx_input_info(m, 0, &vi) == TS_OK && vi.dims[0] == -1 && vi.dim_names[0] &&
          !strcmp(vi.dim_names[0], "N") && vi.dims[1] == 3);
    CHECK(ts_onnx_input_info(m, 1, &vi) == TS_ERR_ARG);
    ts_error_clear();
    ts_scope_begin();
    ts_tensor *y = NULL, *x = ts_ones(TS_SHAPE(2, 4), (ts_opts){0});
    CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_SHAPE && !y);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input 'x' must have shape [N, 3]");
    x = ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64});
    CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input 'x' must be float32");
    CHECK(ts_onnx_run(m, 0, NULL, 1, &y) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "the model has 1 inputs, 0 given");
    CHECK(ts_onnx_run(m, 1, &x, 2, (ts_tensor *[2]){0}) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "2 outputs asked, the model has 1");
    ts_scope_end();
    CHECK(m && runs_right(m));
    ts_module_free(m);
    arena_free();
}

int main(void) {
    printf("refused as they should be:\n");
    test_graphs();
    test_initializers();
    test_nesting();
    test_subgraph_order();
    test_buffers();
    test_run_checks();
    damaged("truncated", true);
    damaged("bytes overwritten", false);
    arena_free();
    arena_release();
    return ts_test_finish();
}
#endif
