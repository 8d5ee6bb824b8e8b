"""tessera.optim's optimizers: PyTorch's classes (param_groups, step, zero_grad, state_dict) over
one C optimizer each (python/src/optim.c). The Python param_groups are the source of truth for the
learning rate (schedulers write group["lr"]); step() hands changed rates to C first."""
from .. import _C

Tensor = _C.Tensor
(_SGD, _ADAM, _ADAMW, _RMSPROP, _ADAGRAD, _ADADELTA, _ADAMAX, _NADAM, _RADAM, _ASGD,
 _RPROP) = range(11)


class Optimizer:
    _kind = None
    _per_group = ("lr", "weight_decay")  # the options a later param group may set itself

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups = []
        self.state = {}
        self._c = None
        self._lrs = []
        self._moms = []
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        g = dict(param_group)
        params = g["params"]
        g["params"] = [params] if isinstance(params, Tensor) else list(params)
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        seen = {id(p) for og in self.param_groups for p in og["params"]}
        if any(id(p) in seen for p in g["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        for k, v in g.items():
            if k not in ("params",) + self._per_group and k in self.defaults and \
                    v != self.defaults[k] and self.param_groups:
                raise NotImplementedError(f"tessera: a param group with its own {k!r} (only "
                                          f"{', '.join(self._per_group)} may differ per group)")
        if self._c is None:
            self._c = _C._optim_new(self._kind, g["params"], self._hyper(g), *self._flags(g))
        else:
            self._c.add_param_group(g["params"], float(g["lr"]),
                                    float(g.get("weight_decay", 0.0)))
        self.param_groups.append(g)
        self._lrs.append(g["lr"])
        self._moms.append(self._momentum(g))

    @staticmethod
    def _momentum(g):
        """the momentum or beta1 of a group (what OneCycleLR and CyclicLR cycle), or None"""
        if "betas" in g:
            return g["betas"][0]
        return g.get("momentum")

    def _sync_lr(self):
        """hands the lr and momentum / beta1 the Python groups changed (schedulers) to C"""
        for i, g in enumerate(self.param_groups):
            if g["lr"] != self._lrs[i]:
                self._c.set_lr(i, float(g["lr"]))
                self._lrs[i] = g["lr"]
            m = self._momentum(g)
            if m != self._moms[i]:
                self._c.set_momentum(i, float(m))
                self._moms[i] = m

    def zero_grad(self, set_to_none=True):
        _C._nn_zero_grad([p for g in self.param_groups for p in g["params"]], set_to_none)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        self._sync_lr()
        self._c.step()
        return loss

    def set_master_weights(self, on=True):
        """Float32 master weights for the float16 / bfloat16 parameters (Apex's, llm.c's;
        ts_optim_set_master_weights): each step updates a float32 copy of the parameter, with its
        state in float32, and writes the parameter as that copy rounded once, so updates smaller
        than the parameter's rounding step are not lost. 4 bytes a parameter. float32 / float64
        parameters are unaffected; off drops the masters. The state dict keeps them under
        "master_weight". Refused for an offloaded optimizer (offload keeps its own masters).
        Returns self."""
        self._c.set_master_weights(bool(on))
        return self

    @property
    def master_weights(self):
        """Whether set_master_weights(True) is in force."""
        return self._c.master_weights()

    def state_dict(self):
        """PyTorch's layout: {"state": {i: {name: Tensor}}, "param_groups": [{..., "params": [i]}]}
        (i numbers the parameters over all groups)."""
        state = {}
        for key, t in self._c.state_dict().items():
            kind, index, name = key.split(".", 2)
            if kind == "state":
                state.setdefault(int(index), {})[name] = t
        groups, n = [], 0
        for g in self.param_groups:
            d = {k: v for k, v in g.items() if k != "params"}
            d["params"] = list(range(n, n + len(g["params"])))
            n += len(g["params"])
            groups.append(d)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(self.param_groups, groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        # (older PyTorch checkpoints keep step as a Python number)
        flat = {f"state.{i}.{name}": (_C.tensor(float(t), dtype=_C.float64)
                                      if isinstance(t, (int, float)) else t)
                for i, d in state_dict["state"].items() for name, t in d.items()}
        for gi, sg in enumerate(groups):
            flat[f"param_groups.{gi}.lr"] = _C.tensor(float(sg["lr"]), dtype=_C.float64)
        self._c.load_state_dict(flat)
        for g, sg in zip(self.param_groups, groups):
            g.update({k: v for k, v in sg.items() if k != "params"})
        self._lrs = [g["lr"] for g in self.param_groups]

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for k in sorted(k for k in g if k != "params"):
                s += f"\n    {k}: {g[k]}"
        return s + "\n)"


def _positive(name, v, allow_zero=True):
    if v < 0 or (not allow_zero and v == 0):
        raise ValueError(f"Invalid {name}: {v}")


class SGD(Optimizer):
    _kind = _SGD

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        for name, v in (("learning rate", lr), ("momentum value", momentum),
                        ("weight_decay value", weight_decay)):
            _positive(name, v)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    @staticmethod
    def _hyper(g):
        return (float(g["lr"]), float(g["momentum"]), float(g["dampening"]),
                float(g["weight_decay"]), 0.0)

    @staticmethod
    def _flags(g):
        return bool(g["nesterov"]), bool(g["maximize"])


class Adam(Optimizer):
    _kind = _ADAM

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None):
        _positive("learning rate", lr, allow_zero=False)
        _positive("epsilon value", eps, allow_zero=False)
        _positive("weight_decay value", weight_decay)
        for i, b in enumerate(betas):
            if not 0.0 < b < 1.0:
                # the C options read 0 as the default, so beta 0 cannot be passed on
                raise ValueError(f"Invalid beta parameter at index {i}: {b} "
                                 "(tessera: 0 < beta < 1)")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    @staticmethod
    def _hyper(g):
        return (float(g["lr"]), float(g["betas"][0]), float(g["betas"][1]), float(g["eps"]),
                float(g["weight_decay"]))

    @staticmethod
    def _flags(g):
        return bool(g["amsgrad"]), bool(g["maximize"])


class AdamW(Adam):
    _kind = _ADAMW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    _kind = _RMSPROP

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _positive("learning rate", lr, allow_zero=False)
        _positive("epsilon value", eps, allow_zero=False)
        _positive("momentum value", momentum)
        _positive("weight_decay value", weight_decay)
        if not 0.0 < alpha:
            raise ValueError(f"Invalid alpha value: {alpha} (tessera: alpha > 0)")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    @staticmethod
    def _hyper(g):
        return (float(g["lr"]), float(g["alpha"]), float(g["eps"]), float(g["weight_decay"]),
                float(g["momentum"]))

    @staticmethod
    def _flags(g):
        return bool(g["centered"]), bool(g["maximize"])


# ---------------------------------------------------------------------------------------------
# Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop: PyTorch's signatures and defaults; the C
# rules follow torch.optim's single-tensor ("for-loop") implementations. foreach, fused and
# capturable change how PyTorch runs a step, never its numbers: they are accepted and ignored
# (Tessera has one fused step). differentiable=True (autograd through step()) is refused.

_RUN_OPTIONS = ("foreach", "capturable", "differentiable", "fused")


def _check_differentiable(name, differentiable):
    if differentiable:
        raise NotImplementedError(f"tessera: {name}(differentiable=True) is not supported (the "
                                  "step is not recorded by autograd)")


def _betas(betas):
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    return (float(betas[0]), float(betas[1]))


class _MoreOptimizer(Optimizer):
    """The shared part of the optimizers above: _options names the C options in order, _flag1 the
    boolean passed first (NAdam, RAdam: decoupled_weight_decay)."""
    _options = ()
    _flag1 = None

    def _hyper(self, g):
        out = []
        for k in self._options:
            if k == "betas":
                out += [float(g["betas"][0]), float(g["betas"][1])]
            elif k == "etas":
                out += [float(g["etas"][0]), float(g["etas"][1])]
            elif k == "step_sizes":
                out += [float(g["step_sizes"][0]), float(g["step_sizes"][1])]
            else:
                out.append(float(g[k]))
        return tuple(out)

    def _flags(self, g):
        return (bool(g[self._flag1]) if self._flag1 else False), bool(g["maximize"])


class Adagrad(_MoreOptimizer):
    _kind = _ADAGRAD
    _options = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        for name, v in (("learning rate", lr), ("lr_decay value", lr_decay),
                        ("weight_decay value", weight_decay),
                        ("initial_accumulator_value value", initial_accumulator_value),
                        ("epsilon value", eps)):
            _positive(name, v)
        _check_differentiable("Adagrad", differentiable)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))

    def state_dict(self):
        """As PyTorch's Adagrad, which makes every parameter's state when it is built: the
        parameters not stepped yet have step 0 and sum = initial_accumulator_value."""
        from .. import full_like
        d = super().state_dict()
        init = float(self.defaults["initial_accumulator_value"])
        i = 0
        for g in self.param_groups:
            for p in g["params"]:
                if i not in d["state"]:
                    d["state"][i] = {"step": _C.tensor(0.0, dtype=_C.float32),
                                     "sum": full_like(p.detach(), init)}
                i += 1
        d["state"] = dict(sorted(d["state"].items()))
        return d


class Adadelta(_MoreOptimizer):
    _kind = _ADADELTA
    _options = ("lr", "rho", "eps", "weight_decay")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _positive("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _positive("epsilon value", eps)
        _positive("weight_decay value", weight_decay)
        _check_differentiable("Adadelta", differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))


class Adamax(_MoreOptimizer):
    _kind = _ADAMAX
    _options = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _positive("learning rate", lr)
        _positive("epsilon value", eps)
        betas = _betas(betas)
        _positive("weight_decay value", weight_decay)
        _check_differentiable("Adamax", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))


class NAdam(_MoreOptimizer):
    _kind = _NADAM
    _options = ("lr", "betas", "eps", "weight_decay", "momentum_decay")
    _flag1 = "decoupled_weight_decay"

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _positive("learning rate", lr)
        _positive("epsilon value", eps)
        betas = _betas(betas)
        _positive("weight_decay value", weight_decay)
        _positive("momentum_decay value", momentum_decay)
        _check_differentiable("NAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))


class RAdam(_MoreOptimizer):
    _kind = _RADAM
    _options = ("lr", "betas", "eps", "weight_decay")
    _flag1 = "decoupled_weight_decay"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _positive("learning rate", lr)
        _positive("epsilon value", eps)
        betas = _betas(betas)
        _positive("weight_decay value", weight_decay)
        _check_differentiable("RAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))


class ASGD(_MoreOptimizer):
    _kind = _ASGD
    _options = ("lr", "lambd", "alpha", "t0", "weight_decay")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _positive("learning rate", lr)
        _positive("lambd value", lambd)
        _positive("alpha value", alpha)
        _positive("weight_decay value", weight_decay)
        _check_differentiable("ASGD", differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))


class Rprop(_MoreOptimizer):
    _kind = _RPROP
    _options = ("lr", "etas", "step_sizes")
    _per_group = ("lr",)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _positive("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_differentiable("Rprop", differentiable)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))
