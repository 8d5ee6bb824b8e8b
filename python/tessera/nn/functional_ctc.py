"""tessera.nn.functional.ctc_loss: one C call, ts_ctc_loss (src/ops/ctc_loss.c): Graves et al.'s
forward-backward in log space, accumulated in double, PyTorch's gradient with respect to log_probs
(exp(log_probs) - occupancy: through log_softmax, the true gradient with respect to the logits).
input_lengths / target_lengths: an int, a sequence or an integral tensor; targets [N, S] padded or
the 1-D concatenation; log_probs [T, N, C] or unbatched [T, C]."""
from .._C import ctc_loss  # noqa: F401
