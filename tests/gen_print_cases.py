# gen_print_cases.py — regenerates the expected strings of tests/test_print.c from PyTorch 1.13.
# Run: /usr/bin/python3 tests/gen_print_cases.py  (prints the C table rows to paste); each row is
# {name, precision, threshold, edgeitems, linewidth, expected}.
import json

import torch
from torch import _tensor_str as ts

nan, inf = float("nan"), float("inf")
f64, f16, bf16, i32, u8 = torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8


def sim_repr(x, dev):
    """torch has no sim device: build the repr the way _str_intern does for cuda:0, i.e. the cpu
    body with device='...' as the first suffix, through torch's own _add_suffixes."""
    suffixes = ["device='" + dev + "'"]
    if x.numel() == 0:
        if x.dim() != 1:
            suffixes.append("size=" + str(tuple(x.shape)))
        if x.dtype != torch.float32:
            suffixes.append("dtype=" + str(x.dtype))
        body = "[]"
    else:
        if x.dtype not in (torch.float32, torch.int64, torch.bool):
            suffixes.append("dtype=" + str(x.dtype))
        body = ts._tensor_str(x, len("tensor("))
    if x.requires_grad:
        suffixes.append("requires_grad=True")
    return ts._add_suffixes("tensor(" + body, suffixes, len("tensor("), False)


# (name, print options (precision, threshold, edgeitems, linewidth), expression, device)
CASES = [
    ("f32_int_mode", None, "torch.tensor([1., 2., 3.])", None),
    ("f32_fixed", None, "torch.tensor([1.5, -2.25, 3.])", None),
    ("f32_rounding", None, "torch.tensor([12345.678, 99999.5, 100.25])", None),
    ("f32_sci_small", None, "torch.tensor([1e-5, 1.0])", None),
    ("f32_sci_ratio", None, "torch.tensor([123456.789, 0.5])", None),
    ("f32_sci_neg", None, "torch.tensor([-1e-10, 3e5, 0.])", None),
    ("int_mode_sci_big", None, "torch.tensor([1., 1e9])", None),
    ("int_mode_sci_ratio", None, "torch.tensor([1., 2000., -3.])", None),
    ("int_mode_width", None, "torch.tensor([1., -100., 7.])", None),
    ("nonfinite", None, "torch.tensor([nan, inf, -inf, 1.])", None),
    ("nan_fixed", None, "torch.tensor([nan, 1.5, -nan])", None),
    ("nan_sci", None, "torch.tensor([1.5, nan, 1e9])", None),
    ("all_zero", None, "torch.tensor([0., 0.])", None),
    ("all_nan", None, "torch.tensor([nan, nan])", None),
    ("neg_zero", None, "torch.tensor([-0., 1.])", None),
    ("f64_fixed", None, "torch.tensor([0.1, 0.25], dtype=f64)", None),
    ("f64_exp3", None, "torch.tensor([1e-300, 1.], dtype=f64)", None),
    ("f16", None, "torch.tensor([1.5, 2., 0.1], dtype=f16)", None),
    ("bf16", None, "torch.tensor([1.5, 2., 0.1], dtype=bf16)", None),
    ("i64_arange", None, "torch.arange(10)", None),
    ("i64_width", None, "torch.tensor([-5, 100, 7])", None),
    ("i64_big", None, "torch.tensor([2**62 + 1, -1])", None),
    ("i32", None, "torch.tensor([1, 2, 3], dtype=i32)", None),
    ("u8", None, "torch.tensor([0, 255, 7], dtype=u8)", None),
    ("bool", None, "torch.tensor([True, False, True])", None),
    ("scalar_f32", None, "torch.tensor(3.)", None),
    ("scalar_f64", None, "torch.tensor(-2.5, dtype=f64)", None),
    ("scalar_i64", None, "torch.tensor(7)", None),
    ("scalar_bool", None, "torch.tensor(True)", None),
    ("scalar_nan", None, "torch.tensor(nan)", None),
    ("empty_1d", None, "torch.tensor([])", None),
    ("empty_2d", None, "torch.zeros(0, 3)", None),
    ("empty_3d_i64", None, "torch.zeros(2, 0, 4, dtype=torch.int64)", None),
    ("empty_bool", None, "torch.zeros(0, dtype=torch.bool)", None),
    ("mat_2x3", None, "torch.arange(6.).reshape(2, 3)", None),
    ("mat_2x3x4", None, "torch.arange(24.).reshape(2, 3, 4) / 4", None),
    ("mat_4d_int", None, "torch.arange(16).reshape(2, 2, 2, 2)", None),
    ("transposed", None, "torch.arange(6.).reshape(2, 3).t()", None),
    ("strided_slice", None, "torch.arange(10)[::3]", None),
    ("sum_1d", None, "torch.arange(2000)", None),
    ("sum_2d_sci", None, "torch.arange(2000.).reshape(40, 50)", None),
    ("sum_3d", None, "torch.arange(1100.).reshape(10, 11, 10) / 7", None),
    ("sum_transposed", None, "torch.arange(2000.).reshape(40, 50).t()", None),
    ("sum_expanded", None, "torch.tensor([1., -2., 3.5]).expand(500, 3)", None),
    ("sum_rows_only_cols", None, "torch.arange(2000.).reshape(2, 1000) / 1000", None),
    ("wrap_f64", None, "torch.arange(30, dtype=f64) / 29", None),
    ("wrap_int", None, "torch.arange(100)", None),
    ("wrap_2d", None, "torch.arange(40.).reshape(2, 20) / 3", None),
    ("grad", None, "torch.ones(2, requires_grad=True)", None),
    ("grad_f64", None, "torch.tensor([1., 2.], dtype=f64, requires_grad=True)", None),
    ("suffix_wrap", None, "(torch.arange(16, dtype=f64) / 3).requires_grad_()", None),
    ("suffix_wrap_2d", None, "(torch.arange(12, dtype=f64) / 3).reshape(2, 6)", None),
    ("opt_precision", (2, 1000, 3, 80), "torch.tensor([1.12345, 2.5])", None),
    ("opt_precision0", (0, 1000, 3, 80), "torch.tensor([1.5, 2.5, -3.25])", None),
    ("opt_threshold", (4, 5, 3, 80), "torch.arange(10)", None),
    ("opt_edgeitems", (4, 5, 2, 80), "torch.arange(24).reshape(4, 6)", None),
    ("opt_linewidth", (4, 1000, 3, 40), "torch.arange(30.) / 7", None),
    ("sim_f32", None, "torch.tensor([1., 2.])", "sim:0"),
    ("sim_i32", None, "torch.tensor([0, 1, 2], dtype=i32)", "sim:1"),
    ("sim_empty", None, "torch.zeros(0, 3)", "sim:0"),
    ("sim_scalar", None, "torch.tensor(2.5)", "sim:3"),
    ("sim_grad", None, "torch.zeros(2, 2, requires_grad=True)", "sim:0"),
    ("sim_wrap", None, "torch.arange(16, dtype=f64) / 3", "sim:2"),
    ("sim_summarized", None, "torch.arange(2000.).reshape(40, 50) / 3", "sim:0"),
]


def c_string(s):
    """One C literal per output line (JSON escapes are valid C escapes for this ASCII text)."""
    lines = s.split("\n")
    parts = [json.dumps(line + "\n") for line in lines[:-1]] + [json.dumps(lines[-1])]
    return "\n     ".join(parts)


for name, opts, expr, dev in CASES:
    p, t, e, w = opts or (4, 1000, 3, 80)
    torch.set_printoptions(precision=p, threshold=t, edgeitems=e, linewidth=w)
    x = eval(expr)
    s = sim_repr(x, dev) if dev else repr(x)
    torch.set_printoptions(profile="default")
    print("    /* %s */" % expr)
    sep = " " if "\n" not in s else "\n     "
    print("    {%s, %d, %d, %d, %d,%s%s}," % (c_string(name), p, t, e, w, sep, c_string(s)))
