"""torch.multiprocessing.spawn: nprocs processes each running fn(i, *args), joined together; the
first that fails stops the others and its error is raised in the parent (ProcessRaisedException
with the child's traceback, or ProcessExitedException for an exit code or a signal)."""
import multiprocessing
import multiprocessing.connection
import signal
import sys
import traceback


class ProcessException(Exception):
    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """the child raised: msg holds its traceback"""


class ProcessExitedException(ProcessException):
    """the child exited with a non-zero code or was killed by a signal"""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_queue):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        error_queue.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_queues):
        self.processes, self.error_queues = processes, error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def join(self, timeout=None):
        """True once every process ended well; False while some still run (timeout); raises
        for the first that failed, after terminating the rest"""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            self.processes[i].join()
            if self.processes[i].exitcode != 0:
                failed = i
                break
        if failed is None:
            return not self.sentinels
        for p in self.processes:
            if p.is_alive():
                p.terminate()
            p.join()
        proc, code = self.processes[failed], self.processes[failed].exitcode
        if self.error_queues[failed].empty():
            if code < 0:
                name = signal.Signals(-code).name
                raise ProcessExitedException(f"process {failed} terminated with signal {name}",
                                             failed, proc.pid, code, name)
            raise ProcessExitedException(f"process {failed} terminated with exit code {code}",
                                         failed, proc.pid, code)
        msg = (f"\n\n-- Process {failed} terminated with the following error:\n"
               + self.error_queues[failed].get())
        raise ProcessRaisedException(msg, failed, proc.pid)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    ctx = multiprocessing.get_context(start_method)
    processes, error_queues = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_wrap, args=(fn, i, args, q), daemon=daemon)
        p.start()
        processes.append(p)
        error_queues.append(q)
    context = ProcessContext(processes, error_queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    return start_processes(fn, args, nprocs, join, daemon, start_method)
