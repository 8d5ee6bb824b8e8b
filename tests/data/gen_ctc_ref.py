"""gen_ctc_ref.py — PyTorch's ctc_loss values and gradients for tests/test_ctc_loss.c, written to
tests/data/ctc_ref.h (C arrays, so the test needs no parser). Run with /opt/torch2/bin/torch-python tests/data/gen_ctc_ref.py.

Each case: log_probs [T, N, C] (log_softmax of seeded normals, float64), padded targets [N, S],
input / target lengths, blank, zero_infinity; for reductions none, sum and mean the loss and the
gradient w.r.t. log_probs of sum(loss * w) (w: the case's weights for 'none', 1 otherwise)."""
import os

import torch

CASES = [
    # T, N, C, targets (lists), input lengths, blank, zero_infinity
    (6, 4, 5, [[1, 2, 2], [3, 1], [], [4, 4, 4]], [6, 5, 3, 6], 0, False),
    (7, 3, 4, [[0, 1], [3, 3], [1, 0, 3]], [7, 4, 6], 2, False),
    # element 1 infeasible: [1, 1] needs 3 frames, it has 2
    (4, 2, 3, [[1, 2], [1, 1]], [4, 2], 0, True),
    (4, 2, 3, [[1, 2], [1, 1]], [4, 2], 0, False),
    (3, 2, 3, [[1], []], [0, 0], 0, False),  # no frames
]


def num(x):
    if x != x:
        return "NAN"
    if abs(x) == float("inf"):
        return "INFINITY" if x > 0 else "-INFINITY"
    return repr(float(x))


def arr(v, f=num):
    return "{" + ", ".join(f(x) for x in v) + "}"


def main():
    g = torch.Generator().manual_seed(76)
    out = []
    for T, N, C, tg, il, blank, zi in CASES:
        lp = torch.randn(T, N, C, generator=g, dtype=torch.float64).log_softmax(2)
        S = max(1, max(len(t) for t in tg))
        pad = [t + [blank if blank != 0 else 1] * (S - len(t)) for t in tg]
        tl = [len(t) for t in tg]
        w = torch.randn(N, generator=g, dtype=torch.float64)
        case = {"T": T, "N": N, "C": C, "S": S, "blank": blank, "zero_infinity": zi,
                "log_probs": lp.flatten().tolist(), "targets": sum(pad, []),
                "input_lengths": il, "target_lengths": tl, "weights": w.tolist()}
        for red in ("none", "sum", "mean"):
            x = lp.clone().requires_grad_(True)
            loss = torch.nn.functional.ctc_loss(x, torch.tensor(pad), torch.tensor(il),
                                                torch.tensor(tl), blank=blank, reduction=red,
                                                zero_infinity=zi)
            (loss * w).sum().backward() if red == "none" else loss.backward()
            case["loss_" + red] = loss.detach().flatten().tolist()
            case["grad_" + red] = x.grad.flatten().tolist()
        out.append(case)
    lines = ["/* ctc_ref.h — written by tests/data/gen_ctc_ref.py with PyTorch %s: do not edit */"
             % torch.__version__, "/* clang-format off */", "#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
             ""]
    for i, c in enumerate(out):
        for k in ("log_probs", "weights", "loss_none", "loss_sum", "loss_mean", "grad_none",
                  "grad_sum", "grad_mean"):
            lines.append("static const double ctc%d_%s[] = %s;" % (i, k, arr(c[k])))
        for k in ("targets", "input_lengths", "target_lengths"):
            lines.append("static const int64_t ctc%d_%s[] = %s;" % (i, k, arr(c[k], str)))
    lines.append("")
    lines.append("typedef struct ctc_case {")
    lines.append("    int64_t T, N, C, S, blank;")
    lines.append("    bool zero_infinity;")
    lines.append("    const double *log_probs, *weights, *loss[3], *grad[3]; /* none, sum, mean */")
    lines.append("    const int64_t *targets, *input_lengths, *target_lengths;")
    lines.append("} ctc_case;")
    lines.append("static const ctc_case ctc_cases[] = {")
    for i, c in enumerate(out):
        p = "ctc%d_" % i
        lines.append("    {%d, %d, %d, %d, %d, %s, %slog_probs, %sweights, {%sloss_none, %sloss_sum, "
                     "%sloss_mean}, {%sgrad_none, %sgrad_sum, %sgrad_mean}, %stargets, "
                     "%sinput_lengths, %starget_lengths},"
                     % (c["T"], c["N"], c["C"], c["S"], c["blank"],
                        "true" if c["zero_infinity"] else "false", *([p] * 11)))
    lines.append("};")
    lines.append("/* clang-format on */")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctc_ref.h")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
