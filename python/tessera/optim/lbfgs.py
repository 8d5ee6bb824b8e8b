"""tessera.optim.LBFGS — torch.optim.LBFGS in Python over Tessera tensor ops (as PyTorch's is
Python over torch ops): the two-loop recursion over a history of update directions, with an
optional strong-Wolfe line search (line_search_fn="strong_wolfe"). step(closure) re-evaluates the
model through the closure. The flat vectors (gradient, direction, history) live on the parameters'
device in their dtype; the scalars (dot products, step length) are Python floats (PyTorch keeps
them as 0-dim tensors of the parameters' dtype: the same values to that dtype's rounding)."""
from .. import _C
from .optimizer import Optimizer

Tensor = _C.Tensor


def _t():
    import tessera
    return tessera


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _dot(a, b):
    return float(a.dot(b))


def _absmax(a):
    return float(a.abs().max())


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """PyTorch's _strong_wolfe (after minFunc), step for step"""
    d_norm = _absmax(d)
    g = g.clone()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1],
                               bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.clone(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.clone(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


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
        self.state = {}
        self._numel_cache = None

    def add_param_group(self, param_group):
        raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    def _sync_lr(self):
        pass

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            if p.grad is None:
                views.append(p.detach().flatten().mul(0.0))
            else:
                views.append(p.grad.flatten())
        flat = _t().cat(views, 0)
        if self.param_groups[0].get("maximize", False):
            flat = flat.neg()
        return flat

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(update[offset:offset + n].view(tuple(p.shape)), alpha=step_size)
            offset += n

    def _clone_param(self):
        return [p.detach().clone() for p in self._params]

    def _set_param(self, params_data):
        for p, d in zip(self._params, params_data):
            p.copy_(d)

    def _directional_evaluate(self, closure, x, t, d):
        with _t().no_grad():
            self._add_grad(t, d)
        loss = float(closure())
        if self.param_groups[0].get("maximize", False):
            loss = -loss
        flat_grad = self._gather_flat_grad()
        with _t().no_grad():
            self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """PyTorch's LBFGS.step: up to max_iter iterations, the closure re-evaluated per step"""
        if closure is None:
            raise RuntimeError("LBFGS.step requires a closure that reevaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        maximize = group.get("maximize", False)
        state = self.state.setdefault(0, {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = -float(orig_loss) if maximize else float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if _absmax(flat_grad) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / _dot(y, y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q = q.add(old_dirs[i], alpha=-al[i])
                r = q.mul(H_diag)
                for i in range(num_old):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r = r.add(old_stps[i], alpha=al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t_, d_):
                    return self._directional_evaluate(closure, x, t_, d_)
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                with _t().no_grad():
                    self._add_grad(t, d)
                opt_cond = _absmax(flat_grad) <= tolerance_grad
            else:
                with _t().no_grad():
                    self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(closure())
                    loss = -loss if maximize else loss
                    flat_grad = self._gather_flat_grad()
                    opt_cond = _absmax(flat_grad) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if _absmax(d.mul(t)) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def state_dict(self):
        """PyTorch's layout: {"state": {0: {...}}, "param_groups": [{..., "params": [0..n)}]}"""
        g = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        g["params"] = list(range(len(self._params)))
        return {"state": {0: dict(self.state[0])} if 0 in self.state else {},
                "param_groups": [g]}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        st = state_dict["state"]
        self.state = {0: dict(st[0])} if 0 in st else {}
