"""Reference values for tests/python/test_quant_dynamic_lstm.py: PyTorch's dynamic int8 LSTM
(torch.ao.quantization.quantize_dynamic, x86 engine: fbgemm, reduce_range) on small models.
Run with /opt/torch2/bin/torch-python tests/data/gen_quant_dynamic_lstm_ref.py; writes
tests/data/quant_dynamic_lstm.pt: per case the quantized model's state dict (the LSTM at key
prefix "0."), the constructor arguments, an input, h0 / c0, PyTorch's full-sequence output and
h_n / c_n, and the outputs of one step run from each of PyTorch's own states (step_*), which
the test uses to compare single steps without accumulated differences; the float model's
state dict too (quantize_dynamic in Tessera quantizes it)."""
import os

import torch
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

torch.backends.quantized.engine = "x86"
CASES = [  # name, LSTM kwargs, T, B, per_channel
    ("uni", dict(input_size=4, hidden_size=5), 6, 3, False),
    ("bi2", dict(input_size=4, hidden_size=5, num_layers=2, bidirectional=True), 5, 2, False),
    ("bf_pc", dict(input_size=3, hidden_size=4, batch_first=True), 5, 2, True),
]


def main():
    torch.manual_seed(78)
    out = {}
    for name, kw, T, B, per_channel in CASES:
        m = torch.nn.Sequential(torch.nn.LSTM(**kw)).eval()
        m_float = {k: v.clone() for k, v in m.state_dict().items()}
        spec = {torch.nn.LSTM: per_channel_dynamic_qconfig} if per_channel else {torch.nn.LSTM}
        q = quantize_dynamic(m, spec, dtype=torch.qint8)
        L, D, H = kw.get("num_layers", 1), 2 if kw.get("bidirectional") else 1, kw["hidden_size"]
        bf = kw.get("batch_first", False)
        x = torch.randn(B, T, kw["input_size"]) if bf else torch.randn(T, B, kw["input_size"])
        h0, c0 = torch.randn(L * D, B, H) * 0.5, torch.randn(L * D, B, H)
        with torch.no_grad():
            y, (hn, cn) = q[0](x, (h0, c0))
            # single steps from PyTorch's own states (unidirectional one-layer cases)
            steps = []
            if L == 1 and D == 1:
                h, c = h0, c0
                for t in range(T):
                    xt = x[:, t:t + 1] if bf else x[t:t + 1]
                    yt, (h, c) = q[0](xt, (h, c))
                    steps.append((h.clone(), c.clone()))
        out[name] = dict(kwargs=kw, state_dict=q.state_dict(), float_state_dict=m_float, x=x,
                         h0=h0, c0=c0, y=y, hn=hn, cn=cn, step_h=[s[0] for s in steps],
                         step_c=[s[1] for s in steps])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_dynamic_lstm.pt")
    torch.save(out, path)
    print("wrote", path)


if __name__ == "__main__":
    main()
