"""tessera.profiler: torch.profiler's API (key_averages, table, export_chrome_trace, schedule,
record_function) over the C profiler (tests/test_profiler.c checks the trace in depth)."""
import json
import os
import time

import pytest

import tessera as torch
from tessera.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                              schedule, tensorboard_trace_handler)


def _row(avgs, name):
    rows = [r for r in avgs if r.key == name]
    assert len(rows) == 1, (name, [r.key for r in avgs])
    return rows[0]


def test_key_averages_counts_and_self_times():
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    t0 = time.perf_counter_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            torch.add(a, b)
        for _ in range(3):
            torch.matmul(a, b)
        with record_function("block"):
            torch.mul(a, b)
            torch.mul(a, b)
    wall_us = (time.perf_counter_ns() - t0) / 1e3
    avgs = prof.key_averages()
    assert _row(avgs, "add").count == 5
    assert _row(avgs, "matmul").count == 3
    assert _row(avgs, "mul").count == 2
    block = _row(avgs, "block")
    assert block.count == 1
    for r in avgs:
        assert 0 <= r.self_cpu_time_total <= r.cpu_time_total + 1e-9, r
        assert r.cpu_time == pytest.approx(r.cpu_time_total / r.count)
    # the block's children are the two muls: self = total - theirs (ns, exact in the C core)
    mul = _row(avgs, "mul")
    assert block.self_cpu_time_total == pytest.approx(
        block.cpu_time_total - mul.cpu_time_total, abs=1e-3)
    # self times partition the recorded time: their sum is at most the block's wall time
    assert sum(r.self_cpu_time_total for r in avgs) <= wall_us


def test_table_prints():
    a = torch.randn(8, 8)
    with profile() as prof:
        for _ in range(4):
            torch.relu(a)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"):
        assert col in table
    line = [ln for ln in table.splitlines() if ln.startswith("relu ")]
    assert len(line) == 1 and line[0].split()[-1] == "4"
    assert "Self CPU time total:" in table
    assert len([ln for ln in table.splitlines() if ln and not ln.startswith(("-", "Name",
                                                                              "Self CPU"))]) <= 5
    with pytest.raises(ValueError):
        prof.key_averages().table(sort_by="no_such_key")
    shaped = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in shaped


def test_device_time_of_ops_on_a_sim_device():
    """Ops on sim:0 get their device time (a "kernel" row each, and the op row's
    device_time_total / cuda_time_total); the cpu's have none; the table shows device columns
    and sorts by them."""
    a, b = torch.randn(16, 16, device="sim:0"), torch.randn(16, 16, device="sim:0")
    c = torch.randn(16, 16)
    with profile() as prof:
        for _ in range(3):
            torch.matmul(a, b)
        torch.add(c, c)
    avgs = prof.key_averages()
    mm = [r for r in avgs if r.key == "matmul" and r.kind == "op"][0]
    k = [r for r in avgs if r.key == "matmul" and r.kind == "kernel"][0]
    add = [r for r in avgs if r.key == "add" and r.kind == "op"][0]
    assert k.count == 3 and k.cpu_time_total == 0 and k.device_time_total > 0
    assert mm.device_time_total == k.device_time_total == mm.cuda_time_total
    # sim runs its kernels in the calling thread: the device span lies inside the op's
    assert 0 < mm.device_time_total <= mm.cpu_time_total + 1e-3
    assert add.device_time_total == 0
    assert not [r for r in avgs if r.kind == "kernel" and r.key == "add"]
    ev = prof.events()
    ops = {e["correlation"]: e for e in ev if e["kind"] == "op" and e["correlation"]}
    kernels = [e for e in ev if e["kind"] == "kernel"]
    assert len(kernels) == 3 and all(ops[e["correlation"]]["name"] == "matmul" for e in kernels)
    table = avgs.table(sort_by="cuda_time_total")
    assert "Self Device" in table and "Self Device time total:" in table
    rows = [ln.split()[:2] for ln in table.splitlines()[3:5]]
    # the largest device time first: the op and its device row
    assert sorted(r[0] for r in rows) == ["matmul", "matmul"]
    assert ["matmul", "[device]"] in rows


def test_record_shapes_groups_by_shape():
    with profile(record_shapes=True) as prof:
        torch.add(torch.ones(2, 3), 1.0)
        torch.add(torch.ones(2, 3), 1.0)
        torch.add(torch.ones(5), 1.0)
    rows = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "add_scalar"
            or r.key == "add"]
    shapes = sorted((r.input_shapes, r.count) for r in rows)
    assert shapes == [([[2, 3]], 2), ([[5]], 1)], shapes


def test_record_shapes_inputs_in_events_and_table():
    a, b = torch.ones(4, 3), torch.ones(3, 2, dtype=torch.float64)
    with profile(record_shapes=True) as prof:
        torch.matmul(a, b.float())
    mm = [e for e in prof.events() if e["name"] == "matmul"]
    assert len(mm) == 1
    assert json.loads(mm[0]["input_dims"]) == [[4, 3], [3, 2]]
    assert json.loads(mm[0]["input_types"]) == ["float32", "float32"]
    cast = [e for e in prof.events() if e["name"] == "to_dtype"]
    assert [json.loads(e["input_types"]) for e in cast] == [["float64"]]
    line = [ln for ln in prof.key_averages(group_by_input_shape=True).table().splitlines()
            if ln.startswith("matmul ")]
    assert len(line) == 1 and line[0].rstrip().endswith("[[4, 3], [3, 2]]"), line
    with profile() as prof:  # without record_shapes: none
        torch.matmul(a, a.t())
    assert all(e["input_dims"] == "" for e in prof.events())


def test_export_chrome_trace_is_valid(tmp_path):
    w = torch.randn(6, 3, requires_grad=True)
    x = torch.randn(4, 6)
    with profile(profile_memory=True) as prof:
        with record_function("step"):
            loss = (x @ w).relu().sum()
            loss.backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    evs = trace["traceEvents"]
    xs = [e for e in evs if e["ph"] == "X"]
    assert xs and all(e["dur"] >= 0 and e["ts"] >= 0 and e["name"] for e in xs)
    assert {e["cat"] for e in xs} >= {"cpu_op", "backward", "user_annotation"}
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    assert all(ends[i]["ts"] >= starts[i]["ts"] for i in starts)
    assert any(e["ph"] == "C" for e in evs)
    names = {e["name"] for e in xs if e["cat"] == "backward"}
    assert {"MmBackward0", "ReluBackward0", "SumBackward0"} <= names, names


def test_schedule_calls_on_trace_ready_at_the_right_steps():
    ready = []
    a = torch.ones(3)

    def on_ready(p):
        adds = [r for r in p.key_averages() if r.key == "add"]
        steps = sorted(r.key for r in p.key_averages() if r.key.startswith("ProfilerStep#"))
        ready.append((p.step_num, adds[0].count if adds else 0, steps))

    sched = schedule(wait=1, warmup=1, active=2, repeat=2)
    with profile(schedule=sched, on_trace_ready=on_ready) as prof:
        for _ in range(10):
            torch.add(a, a)
            torch.add(a, a)
            prof.step()
    # cycles of wait, warmup, active x2: recorded steps 2-3 and 6-7, saved on leaving 3 and 7
    assert ready == [(4, 4, ["ProfilerStep#2", "ProfilerStep#3"]),
                     (8, 4, ["ProfilerStep#6", "ProfilerStep#7"])]
    actions = [sched(i) for i in range(9)]
    assert actions[:4] == [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                           ProfilerAction.RECORD_AND_SAVE]
    assert actions[8] == ProfilerAction.NONE


def test_schedule_saves_at_exit_mid_cycle():
    ready = []
    with profile(schedule=schedule(wait=0, warmup=0, active=3),
                 on_trace_ready=lambda p: ready.append(p.step_num)) as prof:
        torch.ones(2)
        prof.step()
    assert ready == [1]  # recording when the block ends: collected and handed over


def test_tensorboard_trace_handler(tmp_path):
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path), worker_name="w0")):
        torch.ones(2) + 1
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("w0.") and files[0].endswith(".pt.trace.json")
    json.loads((tmp_path / files[0]).read_text())


def test_record_function_decorator_and_alias():
    @record_function("helper")
    def helper(t):
        return t * 2

    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        helper(torch.ones(3))
        helper(torch.ones(3))
    assert _row(prof.key_averages(), "helper").count == 2
    assert "helper" in prof.table(sort_by="self_cpu_time_total")


def test_transfers_are_recorded():
    if not torch.sim.is_available():
        torch.sim.configure(2)
    x = torch.randn(256)
    with profile() as prof:
        y = x.to("sim:0")
        y.cpu()
    tr = prof.transfers()
    kinds = [(t["transfer"], t["bytes"], t["pinned"]) for t in tr]
    assert kinds == [("HtoD", 1024, False), ("DtoH", 1024, False)], kinds
    assert all(t["gbps"] >= 0 for t in tr)
    assert _row(prof.key_averages(), "Memcpy HtoD").count == 1


def test_item_and_numpy_are_device_to_host_transfers():
    if not torch.sim.is_available():
        torch.sim.configure(2)
    y = torch.randn(8).to("sim:0")
    with profile() as prof:
        loss = (y * y).sum()
        loss.item()
        y.tolist()
    kinds = [(t["transfer"], t["bytes"], t["pinned"]) for t in prof.transfers()]
    assert kinds[0] == ("DtoH", 4, False), kinds  # the loss
    assert len(kinds) == 2 and kinds[1][0] == "DtoH" and kinds[1][1] >= 32, kinds  # tolist
    # a cpu tensor's values are read where they are: no transfer
    with profile() as prof:
        torch.ones(3).sum().item()
    assert prof.transfers() == []


def test_errors():
    prof = profile()
    with pytest.raises(RuntimeError, match="no profile"):
        prof.key_averages()
    with profile():
        with pytest.raises(torch.TesseraError, match="already running"):
            torch._C._profiler_start()
    with pytest.raises(torch.TesseraError, match="not running"):
        torch._C._profiler_stop()
    with pytest.raises(ValueError):
        schedule(wait=0, warmup=0, active=0)
    with pytest.raises(TypeError):
        profile(activities=["cpu"])


def _flops_program():
    """Ops of known shapes; the flops PyTorch 2's profiler gives the same program
    (with_flops=True, aten::mm / bmm / conv2d / add / mul; its linear and matmul count on the
    aten::addmm and aten::mm inside them), written out."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    x, w = torch.randn(2, 8, 6, 6), torch.randn(4, 4, 3, 3)
    b1, b2 = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    m1, m2 = torch.randn(2, 3, 4, 5), torch.randn(5, 6)
    lw, lb = torch.randn(7, 3), torch.randn(7)
    p, q, r = torch.randn(4, 5), torch.randn(4, 5), torch.randn(5)

    def run():
        torch.mm(a, b)
        torch.mm(a, b)
        torch.bmm(b1, b2)
        torch.nn.functional.conv2d(x, w, padding=1, groups=2)
        torch.nn.functional.linear(a, lw, lb)
        torch.matmul(m1, m2)
        torch.add(p, q)
        torch.mul(p, r)
    # PyTorch's counts, per op (2 * M * N * K; conv2d 2 * N * Ho * Wo * kh * kw * Cin * Cout /
    # groups; add and mul one per element)
    want = {"mm": [120, 120], "bmm": [720], "conv2d": [20736], "linear": [168],
            "matmul": [1440], "add": [20], "mul": [20]}
    return run, want


def test_with_flops_counts_as_pytorch():
    run, want = _flops_program()
    with profile(with_flops=True) as prof:
        run()
    assert prof.record_shapes  # with_flops implies it, as PyTorch's
    ops = [e for e in prof.events() if e["kind"] == "op"]
    got = {}
    for e in ops:
        if e["name"] in want:
            got.setdefault(e["name"], []).append(e["flops"])
    assert got == want
    # bytes moved: the inputs' and the result's (float32)
    mm = next(e for e in ops if e["name"] == "mm")
    assert mm["input_dims"] == "[[4, 3], [3, 5]]"
    assert mm["op_bytes"] == (4 * 3 + 3 * 5 + 4 * 5) * 4
    # key_averages sums them per name (FunctionEventAvg.flops)
    avgs = prof.key_averages()
    for name, counts in want.items():
        assert _row(avgs, name).flops == sum(counts), name
    # the table's flops column: PyTorch's unit, chosen by the smallest nonzero row (20: FLOPs)
    table = avgs.table()
    header = table.splitlines()[1]
    assert header.split()[-2:] == ["Total", "FLOPs"], header
    conv = [ln for ln in table.splitlines() if ln.startswith("conv2d ")]
    assert len(conv) == 1 and conv[0].split()[-1] == "20736.000", conv
    # a larger smallest row: KFLOPs, values scaled
    with profile(with_flops=True) as prof:
        torch.bmm(torch.randn(3, 40, 50), torch.randn(3, 50, 60))  # 720000 FLOPs
        torch.nn.functional.conv2d(torch.randn(2, 8, 60, 60), torch.randn(4, 4, 3, 3), padding=1,
                                   groups=2)  # 2 * 2 * 60 * 60 * 3 * 3 * 8 * 4 / 2
        torch.relu(torch.randn(3))
    table = prof.key_averages().table()
    assert table.splitlines()[1].split()[-2:] == ["Total", "KFLOPs"]
    lines = {ln.split()[0]: ln.split() for ln in table.splitlines()[3:-2]}
    assert lines["bmm"][-1] == "720.000" and lines["conv2d"][-1] == "2073.600"
    assert lines["relu"][-1] == "--"
    # grouped by input shape too
    shaped = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in shaped and "Total KFLOPs" in shaped


def test_with_flops_off_and_trace(tmp_path):
    run, _ = _flops_program()
    with profile(record_shapes=True) as prof:
        run()
    assert all(e["flops"] == 0 and e["op_bytes"] == 0 for e in prof.events())
    assert all(r.flops == 0 for r in prof.key_averages())
    assert "FLOPs" not in prof.key_averages().table()
    # the trace: "flops" on counted ops (as Kineto's), "op_bytes" on ops
    with profile(with_flops=True) as prof:
        run()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    conv = [e for e in ev if e["name"] == "conv2d"]
    assert len(conv) == 1 and conv[0]["args"]["flops"] == 20736
    assert conv[0]["args"]["op_bytes"] == (2 * 8 * 6 * 6 + 4 * 4 * 3 * 3 + 2 * 4 * 6 * 6) * 4
    assert all("flops" not in e["args"] for e in ev if e["name"] == "randn")
    # the older spelling passes it through
    with torch.autograd.profiler.profile(with_flops=True) as old:
        run()
    assert _row(old.key_averages(), "bmm").flops == 720
