"""torch.ScriptObject as a PyTorch checkpoint holds one: a TorchScript custom class's object
(torch.classes.rnn.CellParamsBase, torch.classes.quantized.LinearPackedParamsBase...) pickled as
its qualified name and the state its __getstate__ returned. Tessera keeps both as they are; the
modules that know the class read the state (tessera.ao.nn.quantized.dynamic.LSTM)."""


class ScriptObject:
    """An object of the TorchScript class `qualified_name` with the pickled `state`"""

    def __init__(self, state=None, qualified_name=""):
        self._state, self._qualified_name = state, qualified_name

    def __setstate__(self, st):  # pickle's BUILD: (state, qualified name), as PyTorch writes it
        if not (isinstance(st, tuple) and len(st) == 2 and isinstance(st[1], str)):
            raise ValueError("torch.ScriptObject: expected the state (state, qualified name)")
        self._state, self._qualified_name = st

    def __getstate__(self):
        return (self._state, self._qualified_name)

    def _type_name(self):
        return self._qualified_name

    def __repr__(self):
        return f"ScriptObject <{self._qualified_name}>"
