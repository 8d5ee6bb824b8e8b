/* nn_loss_kinds.c — tessera._C._nn_loss_kind: the losses of src/nn/loss_pointwise.c and
 * loss_margin.c, each one C call; tessera.nn.functional parses PyTorch's arguments and passes plain
 * values here. */
#include "nn_impl.h"

enum {
    LM_KL_DIV,
    LM_HUBER,
    LM_SOFT_MARGIN,
    LM_MARGIN_RANKING,
    LM_HINGE_EMBEDDING,
    LM_COSINE_EMBEDDING,
    LM_TRIPLET_MARGIN,
    LM_POISSON_NLL,
    LM_GAUSSIAN_NLL,
    LM_MULTILABEL_MARGIN,
    LM_MULTILABEL_SOFT_MARGIN,
    LM_MULTI_MARGIN,
    LM_TRIPLET_DISTANCES, /* triplet_margin_with_distance_loss's distances */
    LM_COUNT
};

static const char *const lm_names[LM_COUNT] = {"kl_div",
                                               "huber_loss",
                                               "soft_margin_loss",
                                               "margin_ranking_loss",
                                               "hinge_embedding_loss",
                                               "cosine_embedding_loss",
                                               "triplet_margin_loss",
                                               "poisson_nll_loss",
                                               "gaussian_nll_loss",
                                               "multilabel_margin_loss",
                                               "multilabel_soft_margin_loss",
                                               "multi_margin_loss",
                                               "triplet_margin_with_distance_loss"};

/* the third tensor each kind takes (NULL: none) */
static const char *const lm_third[LM_COUNT] = {NULL,     "weight",   NULL,       "target", NULL,
                                               "target", "negative", NULL,       "var",    NULL,
                                               "weight", "weight",   "dist_swap"};

static ts_tensor *run(int k, ts_tensor **t, ts_reduction r, double a, double b, double c, int f1,
                      int f2) {
    switch (k) {
    case LM_KL_DIV:
        return ts_kl_div(t[0], t[1], r, f1, f2);
    case LM_HUBER:
        return ts_huber_loss(t[0], t[1], r, a, t[2]);
    case LM_SOFT_MARGIN:
        return ts_soft_margin_loss(t[0], t[1], r);
    case LM_MARGIN_RANKING:
        return ts_margin_ranking_loss(t[0], t[1], t[2], a, r);
    case LM_HINGE_EMBEDDING:
        return ts_hinge_embedding_loss(t[0], t[1], a, r);
    case LM_COSINE_EMBEDDING:
        return ts_cosine_embedding_loss(t[0], t[1], t[2], a, r);
    case LM_TRIPLET_MARGIN:
        return ts_triplet_margin_loss(t[0], t[1], t[2], a, b, c, f1, r);
    case LM_POISSON_NLL:
        return ts_poisson_nll_loss(t[0], t[1], f1, f2, a, r);
    case LM_GAUSSIAN_NLL:
        return ts_gaussian_nll_loss(t[0], t[1], t[2], f1, a, r);
    case LM_MULTILABEL_MARGIN:
        return ts_multilabel_margin_loss(t[0], t[1], r);
    case LM_MULTILABEL_SOFT_MARGIN:
        return ts_multilabel_soft_margin_loss(t[0], t[1], t[2], r);
    case LM_TRIPLET_DISTANCES:
        return ts_triplet_margin_distance_loss(t[0], t[1], t[2], a, r);
    default:
        return ts_multi_margin_loss(t[0], t[1], (int)b, a, t[2], r);
    }
}

/* _nn_loss_kind(kind, t0, t1, t2 or None, reduction (0 mean, 1 sum, 2 none), a, b, c, f1, f2):
 * a, b, c and the flags f1, f2 are the kind's numbers (the C signatures in order) */
static PyObject *nn_loss_kind(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    ts_tensor *t[3] = {NULL, NULL, NULL}, *y;
    int kind, reduction, f1, f2;
    double a, b, c;
    if (!PyArg_ParseTuple(args, "iOOOidddpp:_nn_loss_kind", &kind, &o[0], &o[1], &o[2], &reduction,
                          &a, &b, &c, &f1, &f2))
        return NULL;
    if (kind < 0 || kind >= LM_COUNT || reduction < 0 || reduction > 2)
        return PyErr_Format(PyExc_ValueError, "_nn_loss_kind: bad kind %d or reduction %d", kind,
                            reduction);
    const char *fn = lm_names[kind];
    static const char *const first[2] = {"input", "target"};
    static const char *const pairs[2] = {"input1", "input2"};
    bool two_inputs = kind == LM_MARGIN_RANKING || kind == LM_COSINE_EMBEDDING;
    const char *const *names =
        kind == LM_TRIPLET_MARGIN      ? (const char *const[]){"anchor", "positive"}
        : kind == LM_TRIPLET_DISTANCES ? (const char *const[]){"dist_pos", "dist_neg"}
                                       : (two_inputs ? pairs : first);
    for (int i = 0; i < 2; i++)
        if (!(t[i] = tsp_tensor_arg(o[i], fn, names[i]))) return NULL;
    if (lm_third[kind]) {
        bool required = kind == LM_MARGIN_RANKING || kind == LM_COSINE_EMBEDDING ||
                        kind == LM_TRIPLET_MARGIN || kind == LM_GAUSSIAN_NLL;
        if (required ? !(t[2] = tsp_tensor_arg(o[2], fn, lm_third[kind]))
                     : tspn_opt_tensor(o[2], &t[2], fn, lm_third[kind]) < 0)
            return NULL;
    }
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = run(kind, t, (ts_reduction)reduction, a, b, c, f1, f2));
    return tsp_wrap(y);
}

static PyMethodDef loss_kind_functions[] = {
    {"_nn_loss_kind", FN(nn_loss_kind), METH_VARARGS,
     "_nn_loss_kind(kind, t0, t1, t2, reduction, a, b, c, f1, f2)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_loss_kinds(PyObject *m) { return PyModule_AddFunctions(m, loss_kind_functions); }
