/* memo.c — the shape memo: with symbolic dimensions an exporter's shape arithmetic (Shape, Gather,
 * Unsqueeze, Concat, Slice, Cast... ending in Reshape targets, attention scales and causal masks)
 * cannot be folded at load, and it is a few hundred small ops per run. Those values are functions
 * of the graph inputs' shapes alone, so the first run with given shapes keeps them and later runs
 * with the same shapes, dtypes, device and autocast state take them instead of running their nodes.
 * A value is kept only when that is provably exact: its node is deterministic and foldable (no
 * sub-graph), it reads only such values and constants (never a parameter's values), and a Shape or
 * Size reads a value whose shape itself follows from the inputs' shapes (an allowlist: NonZero,
 * Unique, a Reshape to a shape read from data... make the shapes downstream data-dependent). */
#include "onnx/memo.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"

/* a value bigger than this is recomputed each run rather than held between runs */
#define MEMO_MAX_VALUE_BYTES ((size_t)16 << 20)

/* ------------------------------------------------------------------ which shapes are fixed */
/* Operators whose outputs' shapes follow from their inputs' shapes and attributes alone (the
 * transformer rewrites' fused nodes among them). An operator missing here and below makes the
 * shapes after it data-dependent, which is always safe. */
static const char *const shape_ops =
    " Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift Cast CastLike Ceil Celu Clip Cos Cosh"
    " Div Dropout Elu Equal Erf Exp Floor Greater GreaterOrEqual HardSigmoid HardSwish Identity"
    " IsInf IsNaN LeakyRelu Less LessOrEqual Log Max Mean Min Mod Mul Neg Not Or PRelu Pow"
    " Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Tan"
    " Tanh ThresholdedRelu Where Xor BatchNormalization InstanceNormalization LayerNormalization"
    " LRN MeanVarianceNormalization Softmax LogSoftmax Hardmax MatMul Gemm Einsum Conv"
    " ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool"
    " Flatten Transpose Gather GatherElements GatherND ScatterElements ScatterND Concat Shape Size"
    " Trilu CumSum ArgMax ArgMin DepthToSpace SpaceToDepth EyeLike"
    " tessera.Gelu tessera.Linear tessera.Attention tessera.Select ";

/* Operators whose outputs' shapes some inputs' values set too, as "op:inputs" (a Reshape's
 * target, a Slice's starts, ends, axes and steps...): those must be functions of the input shapes.
 */
static const char *const value_shape_ops =
    " Reshape:1 Expand:1 Slice:1234 Squeeze:1 Unsqueeze:1 Tile:1 Range:012 ConstantOfShape:0"
    " Pad:123 Split:1 TopK:1 OneHot:1 Resize:123 Upsample:1 ReduceL1:1 ReduceL2:1 ReduceLogSum:1"
    " ReduceLogSumExp:1 ReduceMax:1 ReduceMean:1 ReduceMin:1 ReduceProd:1 ReduceSum:1"
    " ReduceSumSquare:1 tessera.HeadSplit:12 ";

/* Whether op's output shapes follow from shapes, and the values of which inputs (bits of
 * *by_value) they follow from too. */
static bool shape_rule(const char *op, unsigned *by_value) {
    *by_value = 0;
    char word[64];
    if (strlen(op) > sizeof word - 3) return false;
    snprintf(word, sizeof word, " %s:", op);
    const char *at = strstr(value_shape_ops, word);
    if (at)
        for (at += strlen(word); *at >= '0' && *at <= '9'; at++) *by_value |= 1u << (*at - '0');
    word[strlen(word) - 1] = ' ';
    return at || strstr(shape_ops, word);
}

static bool is_shape_op(const tso_node *n) {
    return !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size");
}

/* The flags of node n's outputs from its inputs' flags f. */
static unsigned char node_flags(const tso_node *n, const unsigned char *f) {
    bool fixed_in = true, only_in = n->n_in > 0, values_only = true;
    unsigned by_value;
    const bool rule = shape_rule(n->op_type, &by_value);
    for (int i = 0; i < n->n_in; i++) {
        if (n->in[i] < 0) continue;
        unsigned char fi = f[n->in[i]];
        fixed_in = fixed_in && (fi & TSO_SHAPE_FIXED);
        only_in = only_in && (fi & TSO_SHAPE_ONLY);
        if (i < 32 && (by_value >> i & 1u)) values_only = values_only && (fi & TSO_SHAPE_ONLY);
    }
    if (n->n_sub || n->def->not_foldable) return 0;
    /* a Shape or Size reads only its input's shape */
    if (is_shape_op(n) && n->n_in >= 1 && n->in[0] >= 0 && (f[n->in[0]] & TSO_SHAPE_FIXED))
        return TSO_SHAPE_FIXED | TSO_SHAPE_ONLY;
    /* the head split's shape (rewrite_xformer.c) reads its first input's shape and its second's
     * values, as the Shape of a Reshape to them */
    if (!strcmp(n->op_type, "tessera.HeadShape") && n->n_in == 2 && n->in[0] >= 0 &&
        n->in[1] >= 0 && (f[n->in[0]] & TSO_SHAPE_FIXED) && (f[n->in[1]] & TSO_SHAPE_ONLY))
        return TSO_SHAPE_FIXED | TSO_SHAPE_ONLY;
    /* the flattened linear (rewrite_xformer.c): its shape follows from its inputs' shapes and
     * the values of its two Reshapes' targets, the second input and the last (where another
     * input takes either place, the rule is not met: data-dependent, which is safe); the linear's
     * shape reads the first input's and the weight's shapes and the second input's values */
    if (!strcmp(n->op_type, "tessera.FlatLinear") && n->n_in >= 4 && fixed_in && !only_in &&
        n->in[1] >= 0 && n->in[n->n_in - 1] >= 0 && (f[n->in[1]] & TSO_SHAPE_ONLY) &&
        (f[n->in[n->n_in - 1]] & TSO_SHAPE_ONLY))
        return TSO_SHAPE_FIXED;
    if (!strcmp(n->op_type, "tessera.LinearShape") && n->n_in >= 3 && fixed_in && n->in[1] >= 0 &&
        (f[n->in[1]] & TSO_SHAPE_ONLY))
        return TSO_SHAPE_FIXED | TSO_SHAPE_ONLY;
    /* a deterministic function of values that are functions of the input shapes is one too */
    if (only_in) return TSO_SHAPE_FIXED | TSO_SHAPE_ONLY;
    return rule && fixed_in && values_only ? TSO_SHAPE_FIXED : 0;
}

unsigned char *tso_shape_values(const tso_graph *g) {
    unsigned char *f = calloc((size_t)g->n_values + 1, 1);
    if (!f) return tsi_error_set(TS_ERR_OOM, "onnx: out of host memory (shape analysis)"), NULL;
    for (int v = 0; v < g->n_values; v++) {
        tso_value_kind k = g->values[v].kind;
        if (k == TSO_V_INPUT || k == TSO_V_PARAM) f[v] = TSO_SHAPE_FIXED;
        if (k == TSO_V_CONST) f[v] = TSO_SHAPE_FIXED | TSO_SHAPE_ONLY;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        unsigned char o = node_flags(n, f);
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0) f[n->out[i]] = o;
    }
    return f;
}

/* ------------------------------------------------------------------ the memo */
typedef struct memo_input {
    ts_dtype dtype;
    ts_shape shape;
} memo_input;

typedef struct memo_key {
    ts_device dev;
    bool autocast;
    ts_dtype autocast_dtype;
    int n;
    memo_input in[];
} memo_key;

typedef struct tso_memo {
    int n_values, n_nodes;
    bool *eligible; /* node k computes shape-only values and no graph output */
    int n_eligible;
    int64_t hits;     /* runs that took vals */
    memo_key *key;    /* what vals were computed for; NULL: nothing yet */
    ts_tensor **vals; /* per value: the kept tensor or NULL */
    bool *kept;       /* per node: every output it has that is read is in vals */
} tso_memo;

/* One lock for every model's memo (the critical sections are a few pointer copies). */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static void entry_free(memo_key *key, ts_tensor **vals, bool *kept, int n_values) {
    for (int v = 0; vals && v < n_values; v++) ts_release(vals[v]);
    free(vals);
    free(kept);
    free(key);
}

static void memo_free(void *p) {
    tso_memo *m = p;
    if (!m) return;
    entry_free(m->key, m->vals, m->kept, m->n_values);
    free(m->eligible);
    free(m);
}

static tso_memo *memo_new(const tso_graph *g) {
    tso_memo *m = calloc(1, sizeof *m);
    unsigned char *f = tso_shape_values(g);
    if (!m || !f || !(m->eligible = calloc((size_t)g->n_nodes + 1, sizeof *m->eligible))) {
        if (!f) ts_error_clear(); /* the memo is an optimisation: the run goes on without it */
        free(f);
        memo_free(m);
        return NULL;
    }
    m->n_values = g->n_values;
    m->n_nodes = g->n_nodes;
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        bool ok = n->n_out > 0;
        for (int i = 0; ok && i < n->n_out; i++)
            ok = n->out[i] < 0 || (f[n->out[i]] & TSO_SHAPE_ONLY);
        /* a graph output is handed to the caller, who may change it in place */
        for (int i = 0; ok && i < g->n_outputs; i++)
            for (int j = 0; j < n->n_out; j++) ok = ok && g->outputs[i] != n->out[j];
        m->eligible[k] = ok;
        m->n_eligible += ok;
    }
    free(f);
    return m;
}

/* The memo of g, made on first use. It lives in the state of the graph's first Shape or Size node
 * (every kept value descends from one; the operator keeps no state of its own there), so it is
 * freed with the graph. NULL when the graph has nothing to keep. Called under memo_lock. */
static tso_memo *memo_of(tso_graph *g) {
    for (int k = 0; k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        if (!is_shape_op(n)) continue;
        if (n->free_state == memo_free) return n->state;
        if (n->state || n->free_state) return NULL;
        tso_memo *m = memo_new(g);
        if (!m) return NULL;
        n->state = m;
        n->free_state = memo_free;
        return m;
    }
    return NULL;
}

static memo_key *key_new(const tso_graph *g, ts_device dev, ts_tensor *const *inputs) {
    memo_key *k = malloc(sizeof *k + (size_t)g->n_inputs * sizeof(memo_input));
    if (!k) return NULL;
    k->dev = dev;
    k->autocast_dtype = TS_DTYPE_DEFAULT;
    k->autocast = tsi_autocast_active(dev, &k->autocast_dtype);
    k->n = g->n_inputs;
    for (int i = 0; i < g->n_inputs; i++)
        k->in[i] = (memo_input){.dtype = ts_dtype_of(inputs[i]), .shape = ts_shape_of(inputs[i])};
    return k;
}

static bool key_eq(const memo_key *a, const memo_key *b) {
    if (!a || !b || !tsi_device_eq(a->dev, b->dev) || a->autocast != b->autocast ||
        a->autocast_dtype != b->autocast_dtype || a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (a->in[i].dtype != b->in[i].dtype || !tsi_shape_equal(a->in[i].shape, b->in[i].shape))
            return false;
    return true;
}

/* A hit: the run takes the memo's values and skips the nodes that made them. */
static bool take(tso_memo *m, ts_tensor **vals, tso_memo_run *r) {
    r->skip = malloc((size_t)m->n_nodes + 1);
    if (!r->skip) return false;
    memcpy(r->skip, m->kept, (size_t)m->n_nodes);
    for (int v = 0; v < m->n_values; v++)
        if (m->vals[v]) vals[v] = ts_retain(m->vals[v]);
    r->hit = true;
    m->hits++;
    return true;
}

void tso_memo_begin(tso_graph *g, ts_device dev, ts_tensor *const *inputs, ts_tensor **vals,
                    tso_memo_run *r) {
    *r = (tso_memo_run){0};
    memo_key *key = key_new(g, dev, inputs);
    if (!key) return; /* out of memory: this run goes without */
    pthread_mutex_lock(&memo_lock);
    tso_memo *m = memo_of(g);
    if (m && m->n_eligible) {
        r->memo = m;
        if (key_eq(m->key, key) && take(m, vals, r)) {
            free(key);
            key = NULL;
        } else {
            r->keep = calloc((size_t)m->n_values + 1, sizeof *r->keep);
            if (!r->keep) r->memo = NULL;
        }
    }
    pthread_mutex_unlock(&memo_lock);
    if (r->keep)
        r->key = key;
    else
        free(key);
}

void tso_memo_note(tso_memo_run *r, const tso_graph *g, int k, ts_tensor *const *vals) {
    if (!r->keep || !r->memo->eligible[k]) return;
    const tso_node *n = &g->nodes[k];
    for (int i = 0; i < n->n_out; i++) {
        int o = n->out[i];
        if (o < 0 || !g->values[o].uses || !vals[o]) continue;
        ts_tensor *t = vals[o];
        if ((size_t)ts_numel(t) * tsi_dtype_size(ts_dtype_of(t)) > MEMO_MAX_VALUE_BYTES) continue;
        r->keep[o] = ts_retain(t);
    }
}

/* Node k is kept when every output it has that something reads was kept. */
static bool *kept_nodes(const tso_memo *m, const tso_graph *g, ts_tensor *const *keep) {
    bool *kept = calloc((size_t)m->n_nodes + 1, sizeof *kept);
    for (int k = 0; kept && k < m->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        bool ok = m->eligible[k];
        for (int i = 0; ok && i < n->n_out; i++)
            ok = n->out[i] < 0 || !g->values[n->out[i]].uses || keep[n->out[i]];
        kept[k] = ok;
    }
    return kept;
}

void tso_memo_end(tso_memo_run *r, const tso_graph *g, bool ok) {
    if (r->keep) {
        tso_memo *m = r->memo;
        bool *kept = ok ? kept_nodes(m, g, r->keep) : NULL;
        if (kept) {
            pthread_mutex_lock(&memo_lock);
            memo_key *old_key = m->key;
            ts_tensor **old_vals = m->vals;
            bool *old_kept = m->kept;
            m->key = r->key;
            m->vals = r->keep;
            m->kept = kept;
            pthread_mutex_unlock(&memo_lock);
            entry_free(old_key, old_vals, old_kept, m->n_values);
            r->key = NULL;
            r->keep = NULL;
        }
        entry_free(r->key, r->keep, NULL, m->n_values);
    }
    free(r->skip);
    *r = (tso_memo_run){0};
}

void tso_memo_stats(tso_graph *g, int64_t *hits, int *skipped_nodes) {
    *hits = 0;
    *skipped_nodes = 0;
    pthread_mutex_lock(&memo_lock);
    const tso_node *anchor = NULL;
    for (int k = 0; k < g->n_nodes && !anchor; k++)
        if (is_shape_op(&g->nodes[k])) anchor = &g->nodes[k];
    const tso_memo *m = anchor && anchor->free_state == memo_free ? anchor->state : NULL;
    if (m) {
        *hits = m->hits;
        for (int k = 0; m->kept && k < m->n_nodes; k++) *skipped_nodes += m->kept[k];
    }
    pthread_mutex_unlock(&memo_lock);
}
