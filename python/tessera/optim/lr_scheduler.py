"""tessera.optim.lr_scheduler — PyTorch's schedulers in pure Python over param_groups' "lr" (their
chainable recursive forms, as torch.optim.lr_scheduler computes them): LambdaLR, MultiplicativeLR,
StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR,
CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, SequentialLR, ChainedScheduler,
ReduceLROnPlateau. OneCycleLR and CyclicLR also cycle a group's "momentum" or betas[0]; the
optimizer hands both to its C step (Optimizer._sync_lr). The rates come from the C library's
arithmetic (ts_lr_rule_step / _closed_form, ts_onecycle_at, ts_cyclic_at, ts_plateau_step,
ts_warm_restarts_step): these classes keep only the state (last_epoch, param_groups, state_dict)."""
import math
import types
from bisect import bisect_right

from .. import _C
from .optimizer import Optimizer


class LRScheduler:
    _kind = None  # the C rule (ts_lr_rule's kind) of the schedulers that have one
    _closed = False  # whether it has torch's closed form (_get_closed_form_lr)

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def _consts(self):
        """the rule's constants (keywords of _C._lr_rule)"""
        return {}

    def _rule(self, closed, factors=None):
        return _C._lr_rule(self._kind, self.last_epoch, self._step_count, self._is_initial, closed,
                           self.base_lrs, self._lrs(), factors=factors, **self._consts())

    def get_lr(self):
        if self._kind is None:
            raise NotImplementedError
        return self._rule(False)

    def _closed_form(self):
        return self._rule(True)

    def get_last_lr(self):
        return self._last_lr

    def step(self, epoch=None):
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = self._closed or (type(self)._get_closed_form_lr is not
                                      LRScheduler._get_closed_form_lr)
            values = self._get_closed_form_lr() if closed else self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, values):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):  # PyTorch's name
        return self._closed_form()

    def _lrs(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler


class LambdaLR(LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    _kind = "lambda"

    def get_lr(self):
        return self._rule(False, [f(self.last_epoch) for f in self.lr_lambdas])

    def state_dict(self):
        """PyTorch's: a plain function is not saved (None); a callable object's __dict__ is"""
        d = super().state_dict()
        d["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else f.__dict__.copy()
                           for f in self.lr_lambdas]
        return d

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        fns = state_dict.pop("lr_lambdas", None) or []
        self.__dict__.update(state_dict)
        for f, saved in zip(self.lr_lambdas, fns):
            if saved is not None:
                f.__dict__.update(saved)


class MultiplicativeLR(LambdaLR):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        for f in (lr_lambda if isinstance(lr_lambda, (list, tuple)) else [lr_lambda]):
            if not callable(f):
                raise TypeError(f"lr_lambda should be a function, but got {type(f).__name__}")
        super().__init__(optimizer, lr_lambda, last_epoch)

    _kind = "multiplicative"

    def get_lr(self):
        if self._is_initial:  # torch does not call the functions then
            return self._lrs()
        return self._rule(False, [f(self.last_epoch) for f in self.lr_lambdas])


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "step", True

    def _consts(self):
        return dict(step_size=self.step_size, gamma=self.gamma)


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = sorted(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "multistep", True

    def _consts(self):
        return dict(milestones=self.milestones, gamma=self.gamma)


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "exponential", True

    def _consts(self):
        return dict(gamma=self.gamma)


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "cosine", True

    def _consts(self):
        return dict(t_max=self.T_max, eta_min=float(self.eta_min))


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "linear", True

    def _consts(self):
        return dict(factor=self.start_factor, end_factor=self.end_factor,
                    total_iters=self.total_iters)


class ConstantLR(LRScheduler):
    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "constant", True

    def _consts(self):
        return dict(factor=self.factor, total_iters=self.total_iters)


class PolynomialLR(LRScheduler):
    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    _kind, _closed = "polynomial", True

    def _consts(self):
        return dict(total_iters=self.total_iters, power=float(self.power))


class CosineAnnealingWarmRestarts(LRScheduler):
    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return self._c(None, False)[3]

    def _c(self, epoch, advance):
        """C's arithmetic (ts_warm_restarts_step / _lrs): (T_i, T_cur, last_epoch, lrs)"""
        return _C._lr_warm_restarts(self.T_0, self.T_mult, float(self.eta_min), float(self.T_i),
                                    float(self.T_cur), self.last_epoch, epoch, self.base_lrs,
                                    advance)

    def step(self, epoch=None):
        """PyTorch's: the next epoch, or epoch (a float allowed); restarts every T_i epochs"""
        self._step_count = getattr(self, "_step_count", 0) + 1
        self.T_i, self.T_cur, self.last_epoch, lrs = self._c(epoch, True)
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        self._last_lr = self._lrs()


def _format_param(name, optimizer, param):
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} "
                             f"has {len(param)} values, param_groups has {n}.")
        return list(param)
    return [param] * n


def _set_momentum(group, use_beta1, m):
    if use_beta1:
        group["betas"] = (m, *group["betas"][1:])
    else:
        group["momentum"] = m


def _momentum_support(optimizer):
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option "
                         "enabled")
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                g["lr"] = lr
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_support(optimizer)
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for mm, bm, g in zip(self.max_momentums, self.base_momentums,
                                     optimizer.param_groups):
                    _set_momentum(g, self.use_beta1, mm)
                    g["max_momentum"], g["base_momentum"] = mm, bm
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    _MODES = {"triangular": 0, "triangular2": 1, "exp_range": 2}  # ts_cyclic_mode

    def _init_scale_fn(self):
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def _c_mode(self):
        """ts_cyclic's fields: total_size, step_ratio, gamma, mode (3: the user's scale_fn)"""
        mode = 3 if self._scale_fn_custom is not None else self._MODES[self.mode]
        return float(self.total_size), float(self.step_ratio), float(self.gamma), mode

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return _C._lr_cyclic_scale(*self._c_mode(), float(x))

    def get_lr(self):
        c = self._c_mode()
        scale = 1.0
        if self._scale_fn_custom is not None:
            at = (int(_C._lr_cyclic_cycle(*c, self.last_epoch)) if self.scale_mode == "cycle"
                  else self.last_epoch)
            scale = float(self._scale_fn_custom(at))
        moms = (self.base_momentums, self.max_momentums) if self.cycle_momentum else (None, None)
        lrs, ms = _C._lr_cyclic(*c, self.last_epoch, scale, self.base_lrs, self.max_lrs, *moms)
        if self.cycle_momentum:
            for g, m in zip(self.optimizer.param_groups, ms):
                _set_momentum(g, self.use_beta1, m)
        return lrs

    def state_dict(self):
        d = super().state_dict()
        fn = d.pop("_scale_fn_custom")
        d["_scale_fn_custom"] = (fn.__dict__.copy() if fn is not None and
                                 not isinstance(fn, types.FunctionType) else None)
        return d

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        self.__dict__.update(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


class OneCycleLR(LRScheduler):
    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        t = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * t) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * t) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=t - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * t) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=t - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        self._pct_start, self._three_phase = float(pct_start), bool(three_phase)
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_support(optimizer)
            mms = _format_param("max_momentum", optimizer, max_momentum)
            bms = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for mm, bm, g in zip(mms, bms, optimizer.param_groups):
                    _set_momentum(g, self.use_beta1, mm)
                    g["max_momentum"], g["base_momentum"] = mm, bm
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = []
        linear = self._anneal_func_type == "linear"
        for g in self.optimizer.param_groups:
            moms = ((g["max_momentum"], g["base_momentum"]) if self.cycle_momentum else
                    (0.0, 0.0))
            lr, mom = _C._lr_onecycle(self.total_steps, self._pct_start, self._three_phase,
                                      linear, self.last_epoch, g["initial_lr"], g["max_lr"],
                                      g["min_lr"], *moms)
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(g, self.use_beta1, mom)
        return lrs


def _check_members(cls, optimizer, schedulers):
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{cls} at index {i} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{cls} does not support `ReduceLROnPlateau` scheduler as it requires "
                             "additional kwargs to be specified when calling `step`, but got one "
                             f"at index {i} in the given schedulers sequence.")
        if optimizer is not s.optimizer:
            raise ValueError(f"{cls} expects all schedulers to belong to the same optimizer, but "
                             f"got scheduler {type(s).__name__} at index {i} has {s.optimizer}, "
                             f"which is different from {type(optimizer).__name__}.")


class _Composite(LRScheduler):
    """state_dict / load_state_dict of a scheduler over schedulers (PyTorch's layout)"""

    def state_dict(self):
        d = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        d["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return d

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, subs):
            s.load_state_dict(sd)


class SequentialLR(_Composite):
    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        _check_members("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one "
                             "more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        self.recursive_undo()
        idx = bisect_right(milestones, 0)
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        s = self if sched is None else sched
        if hasattr(s, "_schedulers"):
            for sub in s._schedulers:
                self.recursive_undo(sub)
        elif hasattr(s, "last_epoch"):
            s.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s._update_lr(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()


class ChainedScheduler(_Composite):
    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but "
                             "got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_members("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in schedulers[-1].optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]


class ReduceLROnPlateau(LRScheduler):
    """PyTorch's: lowers the lr by `factor` when a metric has not improved for `patience` epochs."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs from "
                    f"when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        old = [float(g["lr"]) for g in groups]
        self.best, self.num_bad_epochs, self.cooldown_counter, lrs, reduced = _C._lr_plateau(
            self.mode == "max", self.threshold_mode == "abs", self.factor, self.threshold,
            self.eps, self.patience, self.cooldown, self.best, self.num_bad_epochs,
            self.cooldown_counter, current, self.min_lrs, old)
        if reduced:
            for g, lr, o in zip(groups, lrs, old):
                if lr != o:
                    g["lr"] = lr
        self._last_lr = self._lrs()

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
