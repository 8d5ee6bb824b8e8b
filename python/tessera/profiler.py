"""tessera.profiler — torch.profiler's API over the C profiler (tessera/profiler.h).

    with tessera.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                  schedule=schedule(wait=1, warmup=1, active=2),
                                  on_trace_ready=tensorboard_trace_handler("./log")) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

Every op is recorded on the host clock (sim and cuda ops too: their host side), with autograd
backward nodes linked to their forward op, record_function ranges, DataLoader waits and copies
between devices (bytes, pinned or pageable, GB/s) and collectives (bytes, rank, group size).
docs/PROFILING.md.
"""
import enum
import functools
import json
import math
import os
import socket
import sys
import time
import types

from . import _C

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


def supported_activities():
    """The host side of every device is recorded under CPU; CUDA adds nothing of its own yet."""
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """torch.profiler.schedule: skip_first steps, then cycles of wait, warmup, active steps
    (repeat cycles, 0 = no end); the last active step of a cycle saves (on_trace_ready)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0).")

    def schedule_fn(step):
        if step < 0:
            raise ValueError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return (ProfilerAction.RECORD if mod_step < num_steps - 1
                else ProfilerAction.RECORD_AND_SAVE)
    return schedule_fn


def _default_schedule_fn(_step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready that writes dir_name/<worker>.<ms>.pt.trace.json[.gz] (TensorBoard's
    profiler plugin and Perfetto read it)."""
    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1000000}.pt.trace.json"
        path = os.path.join(dir_name, name)
        if use_gzip:
            import gzip
            tmp = path + ".tmp"
            prof.export_chrome_trace(tmp)
            with open(tmp, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                dst.write(src.read())
            os.remove(tmp)
        else:
            prof.export_chrome_trace(path)
    return handler_fn


class record_function:
    """A named range in the trace (torch.profiler.record_function): a context manager or a
    decorator. Outside a profile it costs a call and records nothing."""

    def __init__(self, name, args=None):
        self.name = str(name)
        self.args = args
        self._open = False

    def __enter__(self):
        _C._profiler_range_push(self.name)
        self._open = True
        return self

    def __exit__(self, *exc):
        if self._open:
            self._open = False
            _C._profiler_range_pop()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return func(*args, **kwargs)
        return wrapper


def _fmt_time(us):
    """PyTorch's table format: 12.345us, 1.234ms, 1.234s."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _flops_unit(smallest):
    """PyTorch's _build_table unit for the flops column: (scale, "FLOPs" / "KFLOPs" / ...)
    chosen by the smallest nonzero count."""
    units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
    k = int(max(0, min(math.log10(smallest) / 3, float(len(units) - 1))))
    return 10.0 ** (k * -3.0), units[k]


class FunctionEventAvg:
    """One row of key_averages: times in microseconds, as PyTorch's."""

    def __init__(self, row, by_input=False):
        name, shape, kind, calls, total_ns, self_ns, max_ns, nbytes, flops = row[:9]
        self.key = name
        # group_by_input_shape: the inputs' dims as PyTorch's, a list of lists ([] when none
        # were recorded); otherwise ""
        self.input_shapes = (json.loads(shape) if shape else []) if by_input else shape
        self.kind = kind
        self.count = calls
        self.bytes = nbytes
        # with_flops: the floating-point operations of the row's calls in all (0: not counted)
        self.flops = flops
        # a kernel row (an op's time on its sim / cuda device) holds device time, no CPU time;
        # _fold_device_time gives each op row its kernels' device time
        device = kind == "kernel"
        self.cpu_time_total = 0.0 if device else total_ns / 1e3
        self.self_cpu_time_total = 0.0 if device else self_ns / 1e3
        self.cpu_time_max = 0.0 if device else max_ns / 1e3
        self.cpu_time = self.cpu_time_total / calls if calls else 0.0
        self.device_time_total = total_ns / 1e3 if device else 0.0
        self.self_device_time_total = self.device_time_total
        self.device_time = self.device_time_total / calls if calls else 0.0

    # PyTorch's names of the same figures
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_fmt_time(self.self_cpu_time_total)}"
                f" cpu_time={_fmt_time(self.cpu_time)} count={self.count}>")


_SORT_KEYS = {"cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
              "cpu_time": "cpu_time", "count": "count", "cpu_time_avg": "cpu_time",
              "self_cpu_time": "self_cpu_time_total"}
for _dev in ("cuda", "device", "xpu"):
    _SORT_KEYS.update({f"{_dev}_time_total": "device_time_total",
                       f"self_{_dev}_time_total": "self_device_time_total",
                       f"{_dev}_time": "device_time", f"{_dev}_time_avg": "device_time"})


def _fold_device_time(rows):
    """Each op row gains the device time of the kernel rows of its name (its own device work, as
    PyTorch's "CUDA total" of an op); the kernel rows stay, as PyTorch lists its kernels."""
    kernels = {}
    for r in rows:
        if r.kind == "kernel":
            kernels[r.key] = kernels.get(r.key, 0.0) + r.device_time_total
    for r in rows:
        if r.kind == "op" and r.key in kernels:
            r.device_time_total = kernels[r.key]
            r.device_time = r.device_time_total / r.count if r.count else 0.0
    return rows


class EventList(list):
    """key_averages()'s result: a list of FunctionEventAvg with PyTorch's table()."""

    def __init__(self, rows, by_shape=False, with_flops=False):
        super().__init__(rows)
        self._by_shape = by_shape
        self._with_flops = with_flops

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None,
              top_level_events_only=False):
        rows = list(self)
        if sort_by is not None:
            attr = _SORT_KEYS.get(sort_by)
            if attr is None:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; one of "
                                 f"{sorted(_SORT_KEYS)}")
            rows.sort(key=lambda r: getattr(r, attr), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_total = sum(r.self_cpu_time_total for r in self) or 1.0
        # a kernel row (an op's device time) is shown as "<op> [device]"
        names = [r.key + " [device]" if r.kind == "kernel" else r.key for r in rows]
        w = max([len("Name")] + [min(len(n), max_name_column_width) for n in names]) + 2
        cols = [("Name", w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12),
                ("CPU total", 12), ("CPU time avg", 14)]
        device = any(r.device_time_total for r in self)
        dev_total = sum(r.self_device_time_total for r in self) or 1.0
        if device:
            cols += [("Self Device", 12), ("Self Device %", 14), ("Device total", 14),
                     ("Device time avg", 16)]
        cols.append(("# of Calls", 12))
        shapes_w = 0
        if self._by_shape:
            # PyTorch's width: the longest shapes + 4, at most 80 (and room for the header)
            shapes_w = max(14, min(max((len(str(r.input_shapes)) for r in self), default=0) + 4,
                                   80))
            cols.append(("Input Shapes", shapes_w))
        # with_flops: PyTorch's "Total <unit>FLOPs", the unit chosen by the smallest nonzero row
        flops = [r.flops for r in self if r.flops > 0] if self._with_flops else []
        if flops:
            flops_scale, flops_unit = _flops_unit(min(flops))
            cols.append((f"Total {flops_unit}", 14))
        line = "-" * sum(width for _, width in cols)
        out = []
        if header:
            out += [line, header]
        out.append(line)
        out.append("".join(f"{name:>{width}}" if i else f"{name:<{width}}"
                           for i, (name, width) in enumerate(cols)))
        out.append(line)
        for r, name in zip(rows, names):
            name = name if len(name) <= max_name_column_width else \
                name[:max_name_column_width - 3] + "..."
            cells = [f"{name:<{w}}",
                     f"{100.0 * r.self_cpu_time_total / self_total:>11.2f}%",
                     f"{_fmt_time(r.self_cpu_time_total):>12}",
                     f"{100.0 * r.cpu_time_total / self_total:>11.2f}%",
                     f"{_fmt_time(r.cpu_time_total):>12}",
                     f"{_fmt_time(r.cpu_time):>14}"]
            if device:
                cells += [f"{_fmt_time(r.self_device_time_total):>12}",
                          f"{100.0 * r.self_device_time_total / dev_total:>13.2f}%",
                          f"{_fmt_time(r.device_time_total):>14}",
                          f"{_fmt_time(r.device_time):>16}"]
            cells.append(f"{r.count:>12}")
            if self._by_shape:
                cells.append(f"{str(r.input_shapes)[:shapes_w]:>{shapes_w}}")
            if flops:
                cells.append(f"{r.flops * flops_scale:>14.3f}" if r.flops > 0 else f"{'--':>14}")
            out.append("".join(cells))
        out.append(line)
        out.append(f"Self CPU time total: {_fmt_time(sum(r.self_cpu_time_total for r in self))}")
        if device:
            out.append(f"Self Device time total: {_fmt_time(dev_total)}")
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()


class profile:
    """torch.profiler.profile: a context manager (or start()/stop()) with step() and a schedule.

    activities: accepted (ProfilerActivity.CPU, CUDA); record_shapes: each op's input shapes
    and dtypes (key_averages(group_by_input_shape=True), "Input Dims" in the trace) and its
    result's; profile_memory: allocated bytes per device after each op (counter events);
    with_stack: accepted, no stacks. The last collected profile answers key_averages(),
    events() and export_chrome_trace()."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        for a in self.activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities holds {a!r}, not a ProfilerActivity")
        # with_flops: each op's floating-point operations from its inputs' shapes, which it
        # records (as PyTorch's, it implies record_shapes)
        self.with_flops = bool(with_flops)
        self.record_shapes = bool(record_shapes) or self.with_flops
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.schedule = schedule or _default_schedule_fn
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._profile = None  # the capsule of the last collected profile
        self._running = False
        self._step_range = False

    # -- the C session
    def _start_trace(self):
        if not self._running:
            _C._profiler_start(record_shapes=self.record_shapes,
                               profile_memory=self.profile_memory, with_stack=self.with_stack,
                               with_flops=self.with_flops)
            self._running = True

    def _stop_trace(self):
        if self._running:
            self._running = False
            self._profile = _C._profiler_stop()

    def _trace_ready(self):
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev, cur):
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev == A.RECORD_AND_SAVE:
            self._stop_trace()
            self._trace_ready()
            if cur in recording:
                self._start_trace()
            return
        if cur in recording and prev not in recording:
            self._start_trace()
        elif cur is None or (prev in recording and cur not in recording):
            was = self._running
            self._stop_trace()
            if was and cur is None:
                self._trace_ready()

    def _step_range_push(self):
        if self.record_steps and self._running:
            _C._profiler_range_push(f"ProfilerStep#{self.step_num}")
            self._step_range = True

    def _step_range_pop(self):
        if self._step_range:
            self._step_range = False
            _C._profiler_range_pop()

    def start(self):
        self._transit(ProfilerAction.NONE, self.current_action)
        self._step_range_push()

    def stop(self):
        self._step_range_pop()
        self._transit(self.current_action, None)

    def step(self):
        """The next step begins: follow the schedule (start, stop, call on_trace_ready)."""
        self._step_range_pop()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._step_range_push()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- results
    def _need(self, what):
        if self._profile is None:
            raise RuntimeError(f"{what}: no profile collected yet (leave the profile block, or "
                               f"wait for on_trace_ready)")
        return self._profile

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        prof = self._need("key_averages")
        if group_by_input_shape:
            rows = _C._profile_key_averages_by_input(prof)
            # (kernel rows have no inputs: their time stays on their own rows)
            return EventList([FunctionEventAvg(r, by_input=True) for r in rows], True,
                             self.with_flops)
        rows = _C._profile_key_averages(prof, False)
        return EventList(_fold_device_time([FunctionEventAvg(r) for r in rows]), False,
                         self.with_flops)

    def events(self):
        """Every recorded event as a dict (kind, name, device, thread, t0_ns, t1_ns, self_ns,
        depth, bytes, shape, flow, transfer, pinned, correlation (an op and its "kernel" event:
        its device time), input_dims, input_types: JSON text, "" when
        not recorded; with_flops: flops, PyTorch's FunctionEvent.flops, and op_bytes, the bytes
        of its inputs and result; 0 when not counted; rank, world_size: a "collective" event's
        rank in its process group and the group's size), in start-time order."""
        return _C._profile_events(self._need("events"))

    def export_chrome_trace(self, path):
        _C._profile_export_chrome(self._need("export_chrome_trace"), os.fspath(path))

    def export_stacks(self, path, metric="self_cpu_time_total"):
        raise NotImplementedError("export_stacks: tessera's profiler records no stacks")

    def transfers(self):
        """The copies between devices: dicts with transfer (HtoD, DtoH, DtoD), bytes, pinned,
        src_device, device, seconds and GB/s."""
        out = []
        for e in self.events():
            if e["kind"] != "transfer":
                continue
            s = (e["t1_ns"] - e["t0_ns"]) * 1e-9
            e = dict(e, seconds=s, gbps=(e["bytes"] / s * 1e-9 if s > 0 else 0.0))
            out.append(e)
        return out

    def collectives(self):
        """The collective and point-to-point operations (all_reduce, broadcast, reduce,
        all_gather, reduce_scatter, send, recv, barrier): dicts with name, bytes (the message; of
        all_gather and reduce_scatter the whole tensor of world-size blocks), shape, device, rank,
        world_size and seconds (from the call to where its data movement finished)."""
        return [dict(e, seconds=(e["t1_ns"] - e["t0_ns"]) * 1e-9) for e in self.events()
                if e["kind"] == "collective"]


# torch.autograd.profiler.profile / record_function: the older spelling
class _AutogradProfile(profile):
    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops)
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stop()
        return False

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)


_autograd_profiler = types.ModuleType("tessera.autograd.profiler")
_autograd_profiler.profile = _AutogradProfile
_autograd_profiler.record_function = record_function
sys.modules["tessera.autograd.profiler"] = _autograd_profiler
from . import autograd as _autograd  # noqa: E402
_autograd.profiler = _autograd_profiler
