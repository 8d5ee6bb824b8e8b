/* module.c — tessera._C: makes the module and lets each part (tsp.h) add its types and
 * functions. */
#include "tsp.h"

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tessera._C",
    .m_doc =
        "Tessera's C core: tensors, autograd, modules, optimizers, data, on cpu, cuda and sim.",
    .m_size = -1,
};

typedef int (*part_init)(PyObject *m);

PyMODINIT_FUNC PyInit__C(void) {
    static const part_init parts[] = {
        tsp_init_errors,       tsp_init_dtypes,   tsp_init_tensor,     tsp_init_autograd,
        tsp_init_index,        tsp_init_dlpack,   tsp_init_nn,         tsp_init_optim,
        tsp_init_amp,          tsp_init_data,     tsp_init_io,         tsp_init_dist,
        tsp_init_cuda,         tsp_init_profiler, tsp_init_image,      tsp_init_sync_debug,
        tsp_init_saved_hooks,  tsp_init_tfevents, tsp_init_vision_ops, tsp_init_masked,
        tsp_init_vision_color,
    };
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (parts[i](m) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
