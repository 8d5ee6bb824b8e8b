"""tessera.nn's recurrent layers over the C modules (nn.h: ts_rnn_new, ts_lstm_new, ts_gru_new and
the cells): RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell with PyTorch's constructor signatures,
parameter names and forward tuples. The layers take a PackedSequence too (utils.rnn): it runs as
the padded batch with each sequence's length, which is what packing means."""
from .models import CModule, _cmake, _to

_KINDS = {"RNN_TANH": 0, "RNN_RELU": 0, "LSTM": 1, "GRU": 2}


def _check_layers(num_layers, dropout):
    if not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"num_layers must be an integer greater than zero, got {num_layers!r}")
    if isinstance(dropout, bool) or not 0 <= float(dropout) <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")


class RNNBase(CModule):
    """nn.RNNBase: mode 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        if mode not in _KINDS:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        _check_layers(num_layers, dropout)
        super().__init__(*_cmake("_nn_rnn", _KINDS[mode], False, input_size, hidden_size,
                                 num_layers, mode == "RNN_RELU", bool(bias), bool(batch_first),
                                 float(dropout), bool(bidirectional), proj_size))
        for k, v in (("mode", mode), ("input_size", input_size), ("hidden_size", hidden_size),
                     ("num_layers", num_layers), ("bias", bias), ("batch_first", batch_first),
                     ("dropout", float(dropout)), ("bidirectional", bidirectional),
                     ("proj_size", proj_size)):
            object.__setattr__(self, k, v)
        _to(self, device, dtype)

    @classmethod
    def _torch_recipe(cls, state):
        """the C constructor's arguments from a module PyTorch pickled (torch.save(model))"""
        mode = state["mode"]
        return ("_nn_rnn", (_KINDS[mode], False, state["input_size"], state["hidden_size"],
                            state["num_layers"], mode == "RNN_RELU", bool(state["bias"]),
                            bool(state["batch_first"]), float(state["dropout"]),
                            bool(state["bidirectional"]), state.get("proj_size", 0)))

    def flatten_parameters(self):
        """PyTorch's cuDNN weight packing: nothing to do here"""

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._flat_weights_names_grouped()]

    @property
    def _flat_weights_names(self):
        """PyTorch's list of the parameters' names, layer by layer (d2l's init_seq2seq reads it)"""
        return [n for names in self._flat_weights_names_grouped() for n in names]

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    def _flat_weights_names_grouped(self):
        dirs = 2 if self.bidirectional else 1
        out = []
        for layer in range(self.num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"]
                if self.bias:
                    names += [f"bias_ih{sfx}", f"bias_hh{sfx}"]
                if self.proj_size:
                    names.append(f"weight_hr{sfx}")
                out.append(names)
        return out

    def _run(self, input, h0, c0):
        """(output, h_n, c_n): a PackedSequence in, a PackedSequence out"""
        self._sync_mode()
        from .utils import rnn as _rnn
        if isinstance(input, _rnn.PackedSequence):
            padded, lengths = _rnn.pad_packed_sequence(input, batch_first=self.batch_first)
            out, hn, cn = self._c.rnn(padded, h0, c0, lengths)
            out = _rnn._pack_like(out, lengths, self.batch_first, input)
            return out, hn, cn
        return self._c.rnn(input, h0, c0, None)


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        object.__setattr__(self, "nonlinearity", nonlinearity)

    def forward(self, input, hx=None):
        out, hn, _ = self._run(input, hx, None)
        return out, hn


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        h0 = c0 = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM.forward: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx
        out, hn, cn = self._run(input, h0, c0)
        return out, (hn, cn)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        out, hn, _ = self._run(input, hx, None)
        return out, hn


class RNNCellBase(CModule):
    def __init__(self, kind, input_size, hidden_size, bias, relu, device, dtype):
        super().__init__(*_cmake("_nn_rnn", kind, True, input_size, hidden_size, 1, relu,
                                 bool(bias), False, 0.0, False, 0))
        for k, v in (("input_size", input_size), ("hidden_size", hidden_size), ("bias", bias)):
            object.__setattr__(self, k, v)
        _to(self, device, dtype)

    @classmethod
    def _torch_recipe(cls, state):
        kind = {"RNNCell": 0, "LSTMCell": 1, "GRUCell": 2}.get(cls.__name__)
        if kind is None:
            return None
        return ("_nn_rnn", (kind, True, state["input_size"], state["hidden_size"], 1,
                            state.get("nonlinearity") == "relu", bool(state["bias"]), False, 0.0,
                            False, 0))

    def _cell(self, input, hx, cx):
        self._sync_mode()
        return self._c.rnn_cell(input, hx, cx)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(0, input_size, hidden_size, bias, nonlinearity == "relu", device, dtype)
        object.__setattr__(self, "nonlinearity", nonlinearity)

    def forward(self, input, hx=None):
        return self._cell(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(1, input_size, hidden_size, bias, False, device, dtype)

    def forward(self, input, hx=None):
        h = c = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTMCell.forward: hx must be a tuple (h_0, c_0)")
            h, c = hx
        return self._cell(input, h, c)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(2, input_size, hidden_size, bias, False, device, dtype)

    def forward(self, input, hx=None):
        return self._cell(input, hx, None)[0]
