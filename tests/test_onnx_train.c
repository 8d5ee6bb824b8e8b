/* test_onnx_train.c — the ai.onnx.preview.training domain (src/onnx/ops_train.c), which the
 * backend suite covers thinly, on models packed with protobuf-c
 * (tests/onnx_support/onnx_op_util.h), on every test device: Adam, Momentum (Nesterov) and Adagrad
 * past their first step against the formulas in float64; Gradient through an initializer (whose
 * gradient stays untouched) with xs and zs (an integer z among them). Then the errors: bad
 * attributes refused at load (TS_ERR_UNSUPPORTED / TS_ERR_FORMAT naming the node), the domain's
 * import and versions, bad shapes and dtypes at run time, Gradient's y and autograd. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

/* ------------------------------------------------------------------ training operators */
enum { TN = 3 }; /* elements per optimized tensor */

/* Runs a training-domain optimizer on two tensors of TN float64 values (state groups `per` - 2)
 * with R = 0.1 and T = t; out gets (per - 1) * 2 tensors. */
static bool run_optimizer(model *b, ts_device dev, int per, int64_t t, double v[][2][TN],
                          ts_tensor **out) {
    ts_module *m = load(b, dev);
    double r = 0.1;
    ts_tensor *in[10] = {tensor(dev, TS_F64, TS_SHAPE(), &r), tensor(dev, TS_I64, TS_SHAPE(), &t)};
    for (int k = 0; k < per; k++)
        for (int i = 0; i < 2; i++) in[2 + k * 2 + i] = tensor(dev, TS_F64, TS_SHAPE(TN), v[k][i]);
    bool ok = run(m, 2 + 2 * per, in, (per - 1) * 2, out);
    ts_module_free(m);
    return ok;
}

static model *optimizer_model(const char *op, int per) {
    static const char *ins[] = {"", "", "", "R T X1 X2 G1 G2 V1 V2", "R T X1 X2 G1 G2 V1 V2 H1 H2"};
    static const char *outs[] = {"", "", "", "X1n X2n V1n V2n", "X1n X2n V1n V2n H1n H2n"};
    model *b = model_new(op, TRAINING, 17, ins[per], outs[per]);
    import(b, TRAINING, 1);
    return b;
}

/* float64 operands: each output is a handful of operations, so 1e-13 relative covers rounding */
static void check_f64(ts_tensor *got, const double *want, const char *what) {
    double tol[TN];
    for (int i = 0; i < TN; i++) tol[i] = 1e-13 * (1 + fabs(want[i]));
    check_values(got, TS_F64, TS_SHAPE(TN), want, tol, what);
}

static void test_adam(ts_device dev) {
    ts_scope_begin();
    double v[4][2][TN];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++)
                v[k][i][j] = k == 3 ? 0.5 + fabs(next_value()) : next_value();
    model *b = optimizer_model("Adam", 4);
    const double al = 0.875, be = 0.75, eps = 0.0625, nc = 0.125, post = 0.25; /* exact in f32 */
    a_float(b, "alpha", (float)al), a_float(b, "beta", (float)be),
        a_float(b, "epsilon", (float)eps);
    a_float(b, "norm_coefficient", (float)nc), a_float(b, "norm_coefficient_post", (float)post);
    ts_tensor *out[6] = {0};
    const int64_t t = 3;
    CHECK(run_optimizer(b, dev, 4, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], vn[TN], hn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            vn[j] = al * v[2][i][j] + (1 - al) * g;
            hn[j] = be * v[3][i][j] + (1 - be) * g * g;
            double r = 0.1 * sqrt(1 - pow(be, t)) / (1 - pow(al, t)); /* bias correction, T > 0 */
            x[j] = (1 - post) * (v[0][i][j] - r * vn[j] / (sqrt(hn[j]) + eps));
        }
        check_f64(out[i], x, "Adam X"), check_f64(out[2 + i], vn, "Adam V");
        check_f64(out[4 + i], hn, "Adam H");
    }
    model_free();
    ts_scope_end();
}

static void test_momentum(ts_device dev, bool nesterov, int64_t t) {
    ts_scope_begin();
    double v[3][2][TN];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++) v[k][i][j] = next_value();
    model *b = optimizer_model("Momentum", 3);
    const double al = 0.875, be = 0.5, nc = 0.125;
    a_float(b, "alpha", (float)al), a_float(b, "beta", (float)be);
    a_float(b, "norm_coefficient", (float)nc), a_str(b, "mode", nesterov ? "nesterov" : "standard");
    ts_tensor *out[4] = {0};
    CHECK(run_optimizer(b, dev, 3, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], vn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            vn[j] = al * v[2][i][j] + (t > 0 ? be : 1.0) * g; /* the first step takes all of g */
            x[j] = v[0][i][j] - 0.1 * (nesterov ? g + al * vn[j] : vn[j]);
        }
        check_f64(out[i], x, "Momentum X"), check_f64(out[2 + i], vn, "Momentum V");
    }
    model_free();
    ts_scope_end();
}

static void test_adagrad(ts_device dev) {
    ts_scope_begin();
    double v[3][2][TN];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++) v[k][i][j] = k == 2 ? fabs(next_value()) : next_value();
    model *b = optimizer_model("Adagrad", 3);
    const double decay = 0.25, eps = 0.0625, nc = 0.125;
    a_float(b, "decay_factor", (float)decay), a_float(b, "epsilon", (float)eps);
    a_float(b, "norm_coefficient", (float)nc);
    ts_tensor *out[4] = {0};
    const int64_t t = 4;
    CHECK(run_optimizer(b, dev, 3, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], hn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            hn[j] = v[2][i][j] + g * g;
            x[j] = v[0][i][j] - 0.1 / (1 + t * decay) * g / (sqrt(hn[j]) + eps);
        }
        check_f64(out[i], x, "Adagrad X"), check_f64(out[2 + i], hn, "Adagrad H");
    }
    model_free();
    ts_scope_end();
}

/* float32 R and X: the outputs keep X's dtype */
static void test_optimizer_dtypes(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn");
    import(b, TRAINING, 1);
    ts_module *m = load(b, dev);
    float x[2] = {1, -2}, g[2] = {0.5f, 0.25f}, h[2] = {1, 2};
    double r = 0.5;
    int64_t t = 0;
    ts_tensor *in[5] = {tensor(dev, TS_F64, TS_SHAPE(1), &r), tensor(dev, TS_I64, TS_SHAPE(), &t),
                        tensor(dev, TS_F32, TS_SHAPE(2), x), tensor(dev, TS_F32, TS_SHAPE(2), g),
                        tensor(dev, TS_F32, TS_SHAPE(2), h)};
    ts_tensor *out[2] = {0};
    CHECK(run(m, 5, in, 2, out));
    double want[2], tol[2];
    for (int j = 0; j < 2; j++) { /* default epsilon 1e-6; five float32 operations */
        double hn = h[j] + (double)g[j] * g[j];
        want[j] = x[j] - r * g[j] / (sqrt(hn) + 1e-6);
        tol[j] = 8 * U * (fabs(x[j]) + fabs(want[j] - x[j]));
    }
    check_values(out[0], TS_F32, TS_SHAPE(2), want, tol, "Adagrad float32");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* y = (a + b) * a * w with w an initializer: dy/da = (2a + b) w, dy/db = a w (y is not a scalar:
 * the gradient of sum(y)); Gradient(xs = a, zs = b) and Gradient(xs = a b). */
static void test_gradient(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Add", "", 13, "a b", "y da ga gb");
    import(b, TRAINING, 1);
    b->node->output[0] = text("s");
    b->node->n_output = 1;
    add_node(b, "Mul", "", "s a", "p");
    add_node(b, "Mul", "", "p w", "y");
    add_node(b, "Gradient", TRAINING, "a b", "da");
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b"), a_str(b, "y", "y");
    add_node(b, "Gradient", TRAINING, "a b", "ga gb");
    a_strs(b, "xs", "a b"), a_str(b, "y", "y");
    float w[3] = {2, -1, 0.5f};
    init_f32(b, "w", 3, w);
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    float a[3] = {1, 2, -3}, bb[3] = {0.5f, -4, 2};
    ts_tensor *in[2] = {tensor(dev, TS_F32, TS_SHAPE(3), a), tensor(dev, TS_F32, TS_SHAPE(3), bb)};
    ts_tensor *out[4] = {0};
    CHECK(run(m, 2, in, 4, out));
    double da[3], db[3], tol[3];
    for (int j = 0; j < 3; j++) { /* small integers and halves: exact in float32 */
        da[j] = (2.0 * a[j] + bb[j]) * w[j];
        db[j] = (double)a[j] * w[j];
        tol[j] = 0;
    }
    check_values(out[1], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a zs=b");
    check_values(out[2], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a b (a)");
    check_values(out[3], TS_F32, TS_SHAPE(3), db, tol, "Gradient xs=a b (b)");
    ts_tensor *wp = m ? ts_module_get(m, "w") : NULL;
    CHECK(wp && !ts_grad(wp)); /* the initializer's gradient is untouched */
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* zs past the first are fed as they are too: y = (a + b) * Cast(k) with k an int64 z after b
 * (an integer cannot require a gradient, so one taken for an x would fail): dy/da = k. */
static void test_gradient_int_z(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Gradient", TRAINING, 13, "a b k", "da y");
    import(b, TRAINING, 1);
    b->node->n_output = 1; /* y is the graph's other output, made below */
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b k"), a_str(b, "y", "y");
    add_node(b, "Cast", "", "k", "kf");
    a_int(b, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    add_node(b, "Add", "", "a b", "s");
    add_node(b, "Mul", "", "s kf", "y");
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    float a[3] = {1, 2, -3}, bb[3] = {0.5f, -4, 2};
    int64_t k[3] = {3, -2, 5};
    ts_tensor *in[3] = {tensor(dev, TS_F32, TS_SHAPE(3), a), tensor(dev, TS_F32, TS_SHAPE(3), bb),
                        tensor(dev, TS_I64, TS_SHAPE(3), k)};
    ts_tensor *out[2] = {0};
    CHECK(run(m, 3, in, 2, out));
    CHECK_OK();
    const double da[3] = {3, -2, 5}, tol[3] = {0, 0, 0}; /* exact */
    check_values(out[0], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a zs=b k");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_load_errors(void) {
    model *b = optimizer_model("Momentum", 3);
    a_float(b, "alpha", 0.9f), a_float(b, "beta", 1), a_float(b, "norm_coefficient", 0);
    refused(b, TS_ERR_FORMAT, "'mode' is required");
    b = optimizer_model("Momentum", 3);
    a_float(b, "alpha", 0.9f), a_float(b, "beta", 1), a_float(b, "norm_coefficient", 0);
    a_str(b, "mode", "heavy-ball");
    refused(b, TS_ERR_UNSUPPORTED, "mode 'heavy-ball'");
    b = model_new("Adam", TRAINING, 17, "R T X G V", "Xn Vn");
    import(b, TRAINING, 1);
    refused(b, TS_ERR_FORMAT, "(Adam): has 5 inputs");
    b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn"); /* the domain not imported */
    refused(b, TS_ERR_FORMAT, "which the model does not import");
    b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn");
    import(b, TRAINING, 2);
    refused(b, TS_ERR_UNSUPPORTED, "version 2");
    b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn");
    import(b, TRAINING, 1);
    b->m.opset_import[b->m.n_opset_import - 1]->has_version = 0; /* imported with no version */
    refused(b, TS_ERR_UNSUPPORTED, "imports ai.onnx.preview.training version 0;");
    b = model_new("Adagrad", "", 17, "R T X G H", "Xn Hn"); /* the default domain has no Adagrad */
    refused(b, TS_ERR_UNSUPPORTED, "does not support the operator Adagrad");
    b = model_new("Relu", "com.example", 17, "x", "y"); /* other domains stay refused */
    refused(b, TS_ERR_UNSUPPORTED, "in the operator domain 'com.example'");
    b = model_new("Relu", TRAINING, 17, "x", "y");
    import(b, TRAINING, 1);
    refused(b, TS_ERR_UNSUPPORTED, "does not support the operator Relu");
    b = model_new("Gradient", TRAINING, 17, "a", "da");
    import(b, TRAINING, 1);
    a_str(b, "y", "a");
    refused(b, TS_ERR_FORMAT, "'xs'");
    b = model_new("Gradient", TRAINING, 17, "a b", "da");
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "a");
    refused(b, TS_ERR_FORMAT, "has 2 inputs and 1 outputs");
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev}, i64 = {.dtype = TS_I64, .device = dev};
    /* Adam: G's shape is not X's */
    model *b = model_new("Adam", TRAINING, 17, "R T X G V H", "Xn Vn Hn");
    import(b, TRAINING, 1);
    ts_tensor *in[9] = {ts_scalar(0.1, f32),        ts_scalar(1, i64),
                        ts_zeros(TS_SHAPE(3), f32), ts_zeros(TS_SHAPE(2), f32),
                        ts_zeros(TS_SHAPE(3), f32), ts_zeros(TS_SHAPE(3), f32)};
    fails(b, dev, 6, in, TS_ERR_SHAPE, "does not have X's shape");
    b = model_new("Adam", TRAINING, 17, "R T X G V H", "Xn Vn Hn"); /* T must be int64 */
    import(b, TRAINING, 1);
    in[1] = ts_scalar(1, f32), in[3] = ts_zeros(TS_SHAPE(3), f32);
    fails(b, dev, 6, in, TS_ERR_DTYPE, "T must be int64");
    /* Gradient: y depends on a graph input that is neither in xs nor zs; y is no value */
    b = model_new("Add", "", 13, "a b", "s da");
    import(b, TRAINING, 1);
    b->node->n_output = 1;
    add_node(b, "Gradient", TRAINING, "a", "da");
    a_strs(b, "xs", "a"), a_str(b, "y", "s");
    in[0] = ts_ones(TS_SHAPE(2), f32), in[1] = ts_ones(TS_SHAPE(2), f32);
    fails(b, dev, 2, in, TS_ERR_ARG, "y depends on 'b'");
    b = model_new("Gradient", TRAINING, 13, "a", "da");
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "nothing");
    fails(b, dev, 1, in, TS_ERR_ARG, "y 'nothing' is no value");
    b = model_new("Gradient", TRAINING, 13, "a", "da"); /* autograd off */
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "a");
    ts_no_grad_begin();
    fails(b, dev, 1, in, TS_ERR_STATE, "needs autograd");
    ts_no_grad_end();
    ts_scope_end();
}

/* every case on one device */
static void on_device(ts_device dev) {
    test_adam(dev);
    test_momentum(dev, false, 0);
    test_momentum(dev, true, 2);
    test_adagrad(dev);
    test_optimizer_dtypes(dev);
    test_gradient(dev);
    test_gradient_int_z(dev);
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
