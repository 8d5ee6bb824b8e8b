/* tessera/complex.h — complex tensors (TS_C64 = torch.complex64, TS_C128 = torch.complex128):
 * the views between a complex tensor and its float parts, and the complex-only operators.
 *
 * A complex tensor stores (real, imaginary) pairs of float32 / float64. The ops that take complex
 * tensors: these, the views, copies, casts and joins (view, reshape, permute, transpose, select,
 * slice, narrow, squeeze, unsqueeze, expand, flatten, contiguous, clone, detach, to, to_dtype,
 * copy_, cat, stack), the factories (empty, zeros, full, from_data), add, sub, mul, div, neg, abs,
 * sum, mean, the FFTs (tessera/fft.h), matmul / mm / bmm / mv / dot / vdot (both operands complex
 * of one dtype), exp, log, log2, log10, sqrt, rsqrt, reciprocal, sin, cos, tan, sinh, cosh, tanh,
 * sigmoid, sgn, square, pow (C99's principal branches), eq, ne, isnan, isinf, isfinite, isreal,
 * isclose, allclose, and in place add_, sub_, mul_, div_, pow_ (and their _scalar_ forms), neg_,
 * exp_, log_, sqrt_, sigmoid_, tanh_ (a real tensor cannot take a complex result). Every other op
 * refuses a complex tensor with
 * TS_ERR_DTYPE "<op>: not implemented for 'ComplexFloat' (...)". Gradients follow PyTorch's
 * convention (the gradient of a real loss L with respect to z = x + iy is dL/dx + i dL/dy); a
 * complex output needs an explicit gradient for backward. Casting complex to a real dtype is
 * refused (PyTorch warns and drops the imaginary part): take ts_real or ts_abs. Each returns a new
 * tensor (a view where said), or NULL with the error set. */
#ifndef TESSERA_COMPLEX_H
#define TESSERA_COMPLEX_H

#include "tessera.h"

/* torch.view_as_real: a complex [...] as float [..., 2] (real, imaginary), sharing its memory */
TS_API ts_tensor *ts_view_as_real(ts_tensor *t);
/* torch.view_as_complex: a float32 / float64 [..., 2] whose last dim has stride 1 and whose
 * other strides and offset are even, as complex [...], sharing its memory */
TS_API ts_tensor *ts_view_as_complex(ts_tensor *t);
/* torch.complex(real, imag): both float32 or both float64 (broadcast) */
TS_API ts_tensor *ts_complex(ts_tensor *real, ts_tensor *imag);
/* torch.polar(abs, angle) = abs * (cos(angle) + i sin(angle)) */
TS_API ts_tensor *ts_polar(ts_tensor *abs, ts_tensor *angle);
/* torch.real / torch.imag: views of the parts (real of a real tensor is the tensor itself; imag
 * of a real tensor is an error, as PyTorch's) */
TS_API ts_tensor *ts_real(ts_tensor *t);
TS_API ts_tensor *ts_imag(ts_tensor *t);
/* torch.conj, materialised (PyTorch's lazy conjugate bit is not modelled): a real tensor is
 * returned as it is */
TS_API ts_tensor *ts_conj(ts_tensor *t);
/* torch.angle: atan2(imag, real); of a real tensor 0 (x >= 0), pi (x < 0) or NaN, without a
 * gradient */
TS_API ts_tensor *ts_angle(ts_tensor *t);

#endif /* TESSERA_COMPLEX_H */
