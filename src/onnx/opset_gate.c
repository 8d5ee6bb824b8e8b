/* opset_gate.c — the default domain's operators that ONNX changed in opsets 18 to 21, and what
 * Tessera does with a node whose opset is past its table row (docs/ONNX.md, "Opset support").
 *
 * The operator table picks the newest row with since <= the model's opset, so a row written for
 * opset 13 would silently run an opset-18 node with its opset-13 semantics. Every change ONNX made
 * to an operator Tessera implements, in a version past that operator's newest row and up to
 * TSO_OPSET_MAX, is listed here with its verdict:
 *   - ALLOW: the row reads the node's opset and implements the change, or the change only widened
 *     the types (float8, int4, bool, string): a type Tessera lacks is refused where it is read;
 *   - a check function: the new attributes or inputs the row does not implement are refused when
 *     a node uses them (a default value passes);
 *   - NULL: any node of that version is refused.
 * tests/test_onnx_opset_gate.c holds ONNX's own list of the changes in opsets 18 to 21 and fails
 * when a change past a row of Tessera's table is missing here. */
#include <string.h>

#include "onnx/onnx_internal.h"

typedef bool (*gate_fn)(const tso_node *n, int version);

typedef struct change {
    const char *op;
    int version;
    gate_fn check; /* GATE_ALLOW, a check, or NULL (refused) */
    const char *what;
} change;

static bool allow(const tso_node *n, int version) {
    (void)n;
    (void)version;
    return true;
}
#define GATE_ALLOW allow

static bool refuse(const tso_node *n, int version, const char *what) {
    return tso_fail(n, TS_ERR_UNSUPPORTED,
                    "at opset %d: %s (new in %s opset %d) is not implemented by Tessera", n->opset,
                    what, n->op_type, version);
}

/* Resize 18: antialias, axes, keep_aspect_ratio_policy; 19: half_pixel_symmetric */
static bool gate_resize(const tso_node *n, int version) {
    char buf[64];
    if (version == 18) {
        if (tso_attr_int(n, "antialias", 0) != 0)
            return refuse(n, version, "attribute 'antialias'");
        if (tso_attr(n, "axes")) return refuse(n, version, "attribute 'axes'");
        const char *p = tso_attr_string(n, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf);
        if (strcmp(p, "stretch"))
            return refuse(n, version, "attribute 'keep_aspect_ratio_policy' (only 'stretch')");
        return true;
    }
    const char *ct =
        tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
    if (!strcmp(ct, "half_pixel_symmetric"))
        return refuse(n, version,
                      "attribute 'coordinate_transformation_mode' = "
                      "'half_pixel_symmetric'");
    return true;
}

/* ScatterND / ScatterElements 18: reduction max and min */
static bool gate_scatter(const tso_node *n, int version) {
    char buf[16];
    const char *r = tso_attr_string(n, "reduction", "none", buf, sizeof buf);
    if (!strcmp(r, "max") || !strcmp(r, "min"))
        return refuse(n, version, "attribute 'reduction' = 'max' / 'min'");
    return true;
}

/* AveragePool 19 / LpPool 18: dilations (Tessera's avg_pool2d has none); LpPool's ceil_mode */
static bool gate_pool(const tso_node *n, int version) {
    const int64_t *d;
    int nd = tso_attr_ints(n, "dilations", &d);
    for (int i = 0; i < nd; i++)
        if (d[i] != 1) return refuse(n, version, "attribute 'dilations' (other than 1)");
    if (!strcmp(n->op_type, "LpPool") && tso_attr_int(n, "ceil_mode", 0) != 0)
        return refuse(n, version, "attribute 'ceil_mode'");
    return true;
}

/* sorted by operator, then version */
static const change changes[] = {
    {"AveragePool", 19, gate_pool, "dilations"},
    {"Cast", 19, GATE_ALLOW, "float8 types and saturate (float8 is refused as a type)"},
    {"Cast", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"CastLike", 19, GATE_ALLOW, "float8 types and saturate"},
    {"CastLike", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"Constant", 19, GATE_ALLOW, "float8 types"},
    {"Constant", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"ConstantOfShape", 20, GATE_ALLOW, "float8 / bfloat16 / string types"},
    {"ConstantOfShape", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"DFT", 20, NULL, "axis became an input"}, /* the row of 20 implements it */
    {"DequantizeLinear", 19, GATE_ALLOW, "float8 types"},
    {"DequantizeLinear", 21, GATE_ALLOW, "int4 / uint4, block_size (ops_quantize.c)"},
    {"Equal", 19, GATE_ALLOW, "string operands"},
    {"Flatten", 21, GATE_ALLOW, "int4 / uint4 / float8 types"},
    {"GridSample", 20, NULL, "modes linear / cubic, N-d"}, /* the row of 20 implements it */
    {"Identity", 19, GATE_ALLOW, "float8 types"},
    {"Identity", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"If", 19, GATE_ALLOW, "float8 types"},
    {"If", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"IsInf", 20, GATE_ALLOW, "float8 / bfloat16 types"},
    {"IsNaN", 20, GATE_ALLOW, "float8 / bfloat16 types"},
    {"Loop", 19, GATE_ALLOW, "float8 types"},
    {"Loop", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"LpPool", 18, gate_pool, "ceil_mode and dilations"},
    {"OptionalGetElement", 18, GATE_ALLOW, "a tensor or sequence input (ops_seq.c)"},
    {"OptionalHasElement", 18, GATE_ALLOW, "a tensor or sequence input (ops_seq.c)"},
    {"Pad", 18, GATE_ALLOW, "the axes input (ops_shape.c)"},
    {"Pad", 19, GATE_ALLOW, "mode wrap (ops_shape.c)"},
    {"Pad", 21, GATE_ALLOW, "int4 / uint4 / float8 types"},
    {"QLinearMatMul", 21, GATE_ALLOW, "float8 / bfloat16 / float16 scales"},
    {"QuantizeLinear", 19, GATE_ALLOW, "float8 types and saturate (float8 only)"},
    {"QuantizeLinear", 21, GATE_ALLOW, "int4 / uint4, block_size, output_dtype (ops_quantize.c)"},
    {"ReduceL1", 18, NULL, "axes became an input"}, /* rows of 18 in ops_reduce.c */
    {"ReduceL2", 18, NULL, "axes became an input"},
    {"ReduceLogSum", 18, NULL, "axes became an input"},
    {"ReduceLogSumExp", 18, NULL, "axes became an input"},
    {"ReduceMax", 18, NULL, "axes became an input"},
    {"ReduceMax", 20, GATE_ALLOW, "bool type"},
    {"ReduceMean", 18, NULL, "axes became an input"},
    {"ReduceMin", 18, NULL, "axes became an input"},
    {"ReduceMin", 20, GATE_ALLOW, "bool type"},
    {"ReduceProd", 18, NULL, "axes became an input"},
    {"ReduceSumSquare", 18, NULL, "axes became an input"},
    {"Reshape", 19, GATE_ALLOW, "float8 types"},
    {"Reshape", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"Resize", 18, gate_resize, "antialias, axes, keep_aspect_ratio_policy"},
    {"Resize", 19, gate_resize, "coordinate_transformation_mode half_pixel_symmetric"},
    {"Scan", 19, GATE_ALLOW, "float8 types"},
    {"Scan", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"ScatterElements", 18, gate_scatter, "reduction max / min"},
    {"ScatterND", 18, gate_scatter, "reduction max / min"},
    {"Shape", 19, GATE_ALLOW, "float8 types"},
    {"Shape", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"Size", 19, GATE_ALLOW, "float8 types"},
    {"Size", 21, GATE_ALLOW, "int4 / uint4 types"},
    {"Split", 18, GATE_ALLOW, "num_outputs (ops_shape.c)"},
    {"Squeeze", 21, GATE_ALLOW, "int4 / uint4 / float8 types"},
    {"Transpose", 21, GATE_ALLOW, "int4 / uint4 / float8 types"},
    {"Unsqueeze", 21, GATE_ALLOW, "int4 / uint4 / float8 types"},
};

int tso_opset_changes(const char **op, int *version, int i) {
    int count = (int)(sizeof changes / sizeof *changes);
    if (i >= 0 && i < count) {
        *op = changes[i].op;
        *version = changes[i].version;
    }
    return count;
}

bool tso_opset_gate(const tso_node *n) {
    if (!n->def || n->opset < 18) return true;
    for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
        const change *c = &changes[i];
        if (c->version <= n->def->since || c->version > n->opset || strcmp(c->op, n->op_type))
            continue;
        if (!c->check)
            return tso_fail(n, TS_ERR_UNSUPPORTED,
                            "at opset %d: Tessera implements %s as of opset %d; opset %d changed "
                            "it (%s)",
                            n->opset, n->op_type, n->def->since, c->version, c->what);
        if (!c->check(n, c->version)) return false;
    }
    return true;
}
