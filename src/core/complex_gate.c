/* complex_gate.c — the one list of the ops that take complex64 / complex128 tensors.
 *
 * Complex tensors reach every op through the public API, but most ops have no complex path: their
 * integer-or-float logic would read a complex tensor as something else and return a wrong number.
 * So the core refuses a complex tensor at its three doors — an op's input check
 * (tsi_check_input), a new tensor (tsi_new) and a dtype cast (tsi_cast) — unless the op's name is
 * in this list, and each op named here has a complex path of its own. Adding complex support to an
 * op is: write its path (most compose real ops over view_as_real, src/ops/complex.c), add its name
 * here, add its row to the tests (tests/test_complex.c).
 *
 * Only names no other function uses belong here: the structural ops, which move elements without
 * looking at them (views, copies, casts, joins, factories), the complex-only ops, and the
 * predicates composed of ops with complex paths (isclose, isnan...). Arithmetic that also has a
 * complex path (add, mul, abs, sum, exp, matmul, their in-place forms...: complex_arith.c,
 * complex_math.c, complex_linalg.c, complex_inplace.c) is not listed: its public function takes
 * the complex path before its input check, so that another function sharing the name (add_scalar
 * is "add" too) stays refused. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* sorted (strcmp order): bsearch; tests/test_complex.c checks the order */
static const char *const complex_ops[] = {
    "angle",
    "autograd_grad", /* the engine's pass for chosen inputs (ts_autograd_grad) */
    "backward",      /* the engine: casts, copies, and leaf sums over the parts */
    "cat",
    "clone",
    "complex_binary", /* complex_native.c's result: the binary kernels' complex path */
    "conj",
    "contiguous",
    "copy_",
    "copy_to_host",
    "detach",
    "device_of",
    "dtype_of",
    "element_size",
    "empty",
    "empty_like",
    "expand",
    "expand_as",
    "fft_fft",
    "fft_fftn",
    "fft_fftshift",
    "fft_hfft",
    "fft_hfftn",
    "fft_ifft",
    "fft_ifftn",
    "fft_ifftshift",
    "fft_ihfft",
    "fft_ihfftn",
    "fft_irfft",
    "fft_irfftn",
    "fft_rfft",
    "fft_rfftn",
    "fill_",
    "flatten",
    "from_data",
    "from_shared_fd", /* shared_storage.c: bytes only */
    "full",
    "full_like",
    "imag",
    "is_contiguous",
    "isclose",  /* composed of eq, ne, sub, abs: each with its complex path */
    "isfinite", /* isnan, isinf, isfinite, isreal: over the parts (logic.c) */
    "isinf",
    "isnan",
    "isreal",
    "istft", /* stft.c: composed over the real views and the FFTs */
    "narrow",
    "nbytes",
    "ndim",
    "numel",
    "ones",
    "ones_like",
    "permute",
    "print",
    "real",
    "register_hook", /* hooks on gradients (leaf_hooks.c, tensor_hooks.c): no cast across kinds */
    "reshape",
    "safetensors_load",
    "safetensors_parse",
    "safetensors_save",
    "scalar",
    "select",
    "set_grad",
    "set_requires_grad",
    "shape_of",
    "share_memory_",
    "shared_fd",
    "size",
    "slice",
    "squeeze",
    "stack",
    "stft",
    "storage_offset",
    "stride",
    "t",
    "tensor_list_add",
    "to",
    "to_dlpack",
    "to_dtype",
    "transpose",
    "unsqueeze",
    "view",
    "view_as_complex",
    "view_as_real",
    "zeros",
    "zeros_like",
};

static int cmp_name(const void *key, const void *elem) {
    return strcmp((const char *)key, *(const char *const *)elem);
}

bool tsi_complex_op_ok(const char *op) {
    return bsearch(op, complex_ops, sizeof complex_ops / sizeof complex_ops[0],
                   sizeof complex_ops[0], cmp_name) != NULL;
}

bool tsi_complex_refuse(const char *op, ts_dtype dt, const ts_tensor *t) {
    if (t)
        tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for '%s' (input: %s)", op,
                      tsi_torch_scalar_name(dt), tsi_desc(t));
    else
        tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for '%s'", op, tsi_torch_scalar_name(dt));
    return false;
}
