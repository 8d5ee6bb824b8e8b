"""torch.ao.nn.quantized.dynamic.LSTM: qint8 weights, float activations quantized per tensor at
each call (the C function ts_dynamic_quantized_lstm), PyTorch's state-dict layout
(_all_weight_values.N.param: a torch.classes.rnn.CellParamsBase of kind "quantized_dynamic")."""
import tessera
from tessera import _C
from tessera._script_object import ScriptObject
from tessera.nn.module import Module

__all__ = ["LSTM"]

_CELL = "__torch__.torch.classes.rnn.CellParamsBase"
_LINEAR = "__torch__.torch.classes.quantized.LinearPackedParamsBase"


class LSTM(Module):
    """torch.ao.nn.quantized.dynamic.LSTM (qint8 weights). Each gate projection W x + b is a
    dynamic int8 linear (x quantized from its min and max, reduce_range as PyTorch's x86
    backend), the gates and the cell in float32. proj_size and PackedSequence inputs are not
    supported (NotImplementedError)."""

    _version = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, dtype=None):
        super().__init__()
        if dtype not in (None, tessera.qint8):
            raise NotImplementedError(f"tessera: dynamic quantized LSTM with dtype={dtype} "
                                      "(only qint8 weights)")
        if proj_size:
            raise NotImplementedError("tessera: dynamic quantized LSTM with proj_size > 0")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an integer greater than zero, got "
                             f"{num_layers!r}")
        self.mode = "LSTM"
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), 0
        self.dtype = tessera.qint8
        self.reduce_range = True
        D, G = 2 if bidirectional else 1, 4 * hidden_size
        self._cells = []  # per layer and direction: [w_ih, w_hh, b_ih, b_hh]
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else hidden_size * D
            for _ in range(D):
                self._cells.append([_qzeros(G, n_in), _qzeros(G, hidden_size),
                                    tessera.zeros(G), tessera.zeros(G)])

    def _flat_params(self):
        if self.bias:
            return [t for c in self._cells for t in c]
        return [t for c in self._cells for t in c[:2]]

    def forward(self, input, hx=None):
        if not isinstance(input, tessera.Tensor):
            raise NotImplementedError("tessera: dynamic quantized LSTM with a PackedSequence "
                                      "input (give the padded tensor)")
        h0 = c0 = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("DynamicQuantizedLSTM.forward: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx
        out, hn, cn = _C._dynamic_quantized_lstm(
            input, h0, c0, self._flat_params(), self.num_layers, self.bidirectional,
            self.batch_first, self.bias, self.reduce_range)
        return out, (hn, cn)

    # ------------------------------------------------------------------ weights
    def _keys(self):
        return [f"_all_weight_values.{i}.param" for i in range(len(self._cells))]

    def set_cell_params(self, i, w_ih, w_hh, b_ih, b_hh):
        """Layer-direction i's weights (qint8, [4H, in] and [4H, H]) and float biases ([4H])"""
        cur = self._cells[i]
        for name, new, old in (("w_ih", w_ih, cur[0]), ("w_hh", w_hh, cur[1])):
            if not getattr(new, "is_quantized", False) or new.dtype != tessera.qint8:
                raise TypeError(f"DynamicQuantizedLSTM: {name} of cell {i} must be a qint8 "
                                "quantized tensor")
            if tuple(new.shape) != tuple(old.shape):
                raise ValueError(f"DynamicQuantizedLSTM: {name} of cell {i} has shape "
                                 f"{tuple(new.shape)}, expected {tuple(old.shape)}")
        bs = []
        for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
            if b is None:
                b = tessera.zeros(4 * self.hidden_size)
            b = b.detach().float().contiguous()
            if tuple(b.shape) != (4 * self.hidden_size,):
                raise ValueError(f"DynamicQuantizedLSTM: {name} of cell {i} has shape "
                                 f"{tuple(b.shape)}, expected {(4 * self.hidden_size,)}")
            bs.append(b)
        self._cells[i] = [w_ih, w_hh, bs[0], bs[1]]

    def _all_weight_values(self):
        return [_cell_object(c, self.reduce_range) for c in self._cells]

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for k, obj in zip(self._keys(), self._all_weight_values()):
            destination[prefix + k] = obj

    def _custom_state_keys(self):
        return self._keys()

    def _load_custom_state(self, sd, prefix):
        parsed = [_parse_cell(sd[prefix + k], k) for k in self._keys()]
        if len({p[4] for p in parsed}) > 1:
            raise NotImplementedError("tessera: dynamic quantized LSTM whose cells differ in "
                                      "reduce_range")
        for i, (w_ih, w_hh, b_ih, b_hh, _) in enumerate(parsed):
            self.set_cell_params(i, w_ih, w_hh, b_ih, b_hh)
        self.reduce_range = parsed[0][4]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    def _get_name(self):
        return "DynamicQuantizedLSTM"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """A float nn.LSTM's copy: each weight quantized to qint8 as PyTorch's
        default_dynamic_qconfig does (MinMaxObserver, per_tensor_symmetric), biases float."""
        from . import _symmetric_qparams
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("tessera: dynamic quantized LSTM with proj_size > 0")
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                mod.dropout, mod.bidirectional)
        D = 2 if mod.bidirectional else 1
        for layer in range(mod.num_layers):
            for d in range(D):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                ws = []
                for name in ("weight_ih", "weight_hh"):
                    w = getattr(mod, name + sfx).detach().float()
                    scale, zp = _symmetric_qparams(w)
                    ws.append(tessera.quantize_per_tensor(w, scale, zp, tessera.qint8))
                bs = [getattr(mod, n + sfx) if mod.bias else None for n in ("bias_ih", "bias_hh")]
                q.set_cell_params(layer * D + d, ws[0], ws[1], bs[0], bs[1])
        return q


def _qzeros(rows, cols):
    return tessera.quantize_per_tensor(tessera.zeros(rows, cols), 1.0, 0, tessera.qint8)


def _cell_object(cell, reduce_range):
    """PyTorch's CellParamsBase state for a quantized_dynamic cell: (kind, [b_ih, b_hh], [],
    [reduce_range], [packed w_ih, packed w_hh]), each packed linear ((w, b), its class)"""
    w_ih, w_hh, b_ih, b_hh = cell
    packed = [ScriptObject((w_ih, b_ih), _LINEAR), ScriptObject((w_hh, b_hh), _LINEAR)]
    return ScriptObject(("quantized_dynamic", [b_ih, b_hh], [], [int(reduce_range)], packed),
                        _CELL)


def _parse_cell(obj, key):
    def bad(what):
        return ValueError(f"DynamicQuantizedLSTM: state-dict entry {key}: {what}")

    if not isinstance(obj, ScriptObject) or not obj._type_name().endswith("CellParamsBase"):
        raise bad(f"expected a torch.classes.rnn.CellParamsBase, got {type(obj).__name__}")
    st = obj._state
    if not (isinstance(st, tuple) and len(st) == 5):
        raise bad("malformed CellParamsBase state")
    kind, tensors, _doubles, longs, packed = st
    if kind != "quantized_dynamic":
        raise NotImplementedError(f"tessera: dynamic quantized LSTM cell of kind {kind!r} "
                                  "(only 'quantized_dynamic': qint8 weights)")
    if len(tensors) != 2 or len(packed) != 2 or len(longs) != 1:
        raise bad("expected 2 biases, 1 reduce_range and 2 packed weights")
    ws = []
    for p in packed:
        if not isinstance(p, ScriptObject) or not p._type_name().endswith(
                "LinearPackedParamsBase"):
            raise bad("expected torch.classes.quantized.LinearPackedParamsBase weights")
        ws.append(p._state[0])
    return ws[0], ws[1], tensors[0], tensors[1], bool(longs[0])
