"""tessera.optim.LBFGS — torch.optim.LBFGS over the C optimizer (ts_lbfgs_*, src/optim/lbfgs.c):
the two-loop recursion over a history of update directions, with an optional strong-Wolfe line
search (line_search_fn="strong_wolfe"), in C; step(closure) re-evaluates the model through the
Python closure, which C calls back. The flat vectors (gradient, direction, history) live on the
parameters' device in their dtype; the scalars (dot products, step length) are doubles (PyTorch
keeps them as 0-dim tensors of the parameters' dtype: the same values to that dtype's
rounding)."""
from .. import _C
from .optimizer import Optimizer

Tensor = _C.Tensor


class LBFGS(Optimizer):
    """torch.optim.LBFGS: lr, max_iter, max_eval, tolerance_grad, tolerance_change, history_size,
    line_search_fn (None or "strong_wolfe"), maximize. One parameter group."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', not "
                             f"{line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        self.defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                             tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                             history_size=history_size, line_search_fn=line_search_fn,
                             maximize=maximize)
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        if len(groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        g = dict(groups[0])
        g["params"] = [g["params"]] if isinstance(g["params"], Tensor) else list(g["params"])
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        self.param_groups = [g]
        self._params = g["params"]
        self._make()

    def _key(self):
        g = self.param_groups[0]
        return (float(g["lr"]), g["max_iter"], g["max_eval"], float(g["tolerance_grad"]),
                float(g["tolerance_change"]), g["history_size"],
                g["line_search_fn"] == "strong_wolfe", bool(g.get("maximize", False)))

    def _make(self):
        self._opts = self._key()
        self._c = _C.CLBFGS(self._params, *self._opts)

    def add_param_group(self, param_group):
        raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    def _sync_lr(self):
        pass

    @property
    def state(self):
        """PyTorch's state: {0: {func_evals, n_iter, d, t, old_dirs, old_stps, ro, H_diag,
        prev_flat_grad, prev_loss}} after a step, {} before"""
        st = self._c.get_state()
        return {0: st} if st else {}

    def step(self, closure):
        """PyTorch's LBFGS.step: up to max_iter iterations, the closure re-evaluated per step;
        returns the closure's first result"""
        if closure is None:
            raise RuntimeError("LBFGS.step requires a closure that reevaluates the model and "
                               "returns the loss")
        if self._key() != self._opts:  # a group option changed (a scheduler's lr): same state
            st = self._c.get_state()
            self._make()
            self._c.set_state(st)
        return self._c.step(closure)

    def state_dict(self):
        """PyTorch's layout: {"state": {0: {...}}, "param_groups": [{..., "params": [0..n)}]}"""
        g = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        g["params"] = list(range(len(self._params)))
        return {"state": self.state, "param_groups": [g]}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        self._make()
        st = state_dict["state"]
        self._c.set_state(dict(st[0]) if 0 in st else {})
