"""A reference template: one process that has imported what a reference worker needs and forks reference workers.

A worker process takes 8-11 s to start on the lent GPU machines (Python, torch, the profiler's first run), and every
new problem takes a fresh reference worker: on the official problems (a new problem per job) jobs waited 0.4-0.9 s
on average for a started one (session 20, two H200s). The template pays that start once per device session; a fork
of it is a reference worker in tens of milliseconds, with nothing of any earlier problem in it.

Only the reference is forked: it runs trusted code, outside the sandbox, and the template has run no problem's code
and never touched the GPU (a CUDA context cannot cross a fork; each child creates its own at its Init, when the
parent says nothing is being timed). Candidate workers are never forked: each gets its own sandbox from a fresh
process (``sandbox.WorkerProcess``).

The template's channel carries three commands from the parent: ``fork`` (with the new worker's channel end and the
write ends of its stdout and stderr pipes as descriptors, and its working folder), ``reap`` (a child's exit status,
once it has exited) and ``exit``. It refuses to fork while it runs a second thread of its own, since a lock held by
another thread at the fork would be held forever in the child.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from kernelbench.evaluation import protocol

#: Descriptors a fork request carries, in order: the worker's end of its channel, its stdout, its stderr.
FORK_FDS = 3


def _python_threads() -> int:
    return threading.active_count()


#: Set in the template's environment by the parent: ``torch.cuda.is_available()`` and ``device_count()`` then ask
#: NVML, which forks survive, rather than the CUDA runtime, which no fork survives. A fork removes it again (its own
#: questions go to the runtime, as a started worker's do) unless the parent's own environment had it.
NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"
#: Set with it by the parent when it added the variable (so that a fork knows to remove it).
NVML_ADDED_ENV = "KB_TEMPLATE_ADDED_NVML_CHECK"

#: Exit codes of a probe fork: why a fork of the template could not use CUDA.
FORK_FAULTS = {3: "torch marks its forks as unable to use CUDA", 4: "the CUDA driver refuses to start in a fork",
               5: "the step itself failed"}


def _fork_fault() -> int:
    """0 when a fork of this process can use CUDA, else a key of :data:`FORK_FAULTS`. Asked of a fork itself, without
    asking the driver anything here: torch marks its forks "bad" once this process has asked the CUDA runtime anything
    (``torch.cuda.is_available()`` does), and the driver's ``cuInit`` fails in a fork of a process that ran it (a device
    count asked from C++, by the profiler's first run, sets no flag torch's forks can see: the fork's ``cuInit`` is the
    test). Session 21's first template asked, and every fork's Init failed."""
    import torch

    if torch.cuda.is_initialized():
        return 3
    pid = os.fork()
    if pid == 0:
        code = 5
        try:
            code = 3 if torch.cuda._is_in_bad_fork() else (4 if _driver_refuses() else 0)
        finally:
            os._exit(code)
    _, raw = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(raw)


def _driver_refuses() -> bool:
    """In a probe fork: does ``cuInit(0)`` fail? (No driver at all, a CPU machine: nothing to refuse.)"""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return lib.cuInit(0) != 0


def fork_is_usable() -> bool:
    """Can a fork of this process use CUDA (:func:`_fork_fault`)?"""
    return _fork_fault() == 0


def _fault_of_step(step) -> int:
    """Would ``step`` leave this process's forks unable to use CUDA? Run in a scout fork, which then asks a fork of
    its own: the template takes a step only when its scout's forks were fine."""
    pid = os.fork()
    if pid == 0:
        code = 5
        try:
            step()
            code = _fork_fault()
        finally:
            os._exit(code)
    _, raw = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(raw)


def _preload_steps(device: str) -> list[tuple[str, object]]:
    """What a reference worker imports as it starts, in steps the template takes only where its forks stay usable
    (a step it leaves out, each fork takes itself, as a started worker does)."""
    def worker_modules() -> None:
        from kernelbench.evaluation.worker.process import Worker

        # Every import a reference worker makes as it starts; not the profiler's first run, which asks the driver
        # (each fork runs that itself, in a millisecond once the template has imported what it needs).
        Worker("reference", device, warm_profiler=False)

    def compiler_modules() -> None:
        import torch._dynamo  # noqa: F401  (nearly all of the profiler's first run's second of imports)

    return [("the worker's modules", worker_modules), ("torch._dynamo", compiler_modules)]


def _fork_child(control, fds: list[int], cwd: str, device: str) -> None:
    """In the new child: become the worker (own session, own output pipes, own folder) and serve; never returns."""
    from kernelbench.evaluation.worker.process import serve_channel

    code = 0
    try:
        os.setsid()  # its own process group: the parent kills the worker and whatever it starts with one killpg
        control.close()
        chan_fd, out_fd, err_fd = fds
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        os.chdir(cwd)
        if os.environ.pop(NVML_ADDED_ENV, None) == "1":
            os.environ.pop(NVML_CHECK_ENV, None)
        from kernelbench.evaluation.channel import Channel

        serve_channel(Channel.from_fd(chan_fd), "reference", device)
    except BaseException:
        code = 1
        try:
            import traceback

            traceback.print_exc()
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _preload(device: str, careful: bool) -> list[str] | None:
    """Take the preloading steps; what was left to the forks, or None where a step taken directly left them unusable.

    ``careful``: each step is tried in a scout fork first (:func:`_fault_of_step`) and taken only where the scout's
    forks were fine. Otherwise (the default) the steps are taken directly and the forks asked once after them: the
    scouts ran every step twice, seconds of the template's start (the first job's wait for its reference) where no
    step has ever spoiled a fork; where one does, the template starts again careful (:func:`_start_again_careful`)."""
    steps = _preload_steps(device)
    if not careful:
        for _, step in steps:
            step()
        return [] if _fork_fault() == 0 else None
    left: list[str] = []
    for name, step in steps:
        fault = _fault_of_step(step)
        if fault:
            left.append(f"{name} ({FORK_FAULTS.get(fault, f'exit status {fault}')})")
        else:
            step()
    return left


#: The flag that starts a template careful (:func:`_preload`).
CAREFUL_FLAG = "--careful"


def _start_again_careful(fd: int, device: str) -> None:
    """Replace this process with a new template that scouts each step (the same pid, the same channel): a step taken
    directly left this one's forks unable to use CUDA, and nothing taken can be untaken."""
    os.set_inheritable(fd, True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "kernelbench.evaluation.worker", "--template", "--fd", str(fd),
                              "--role", "reference", "--device", device, CAREFUL_FLAG])


def serve_template(device: str, fd: int, careful: bool = False) -> None:
    """The template's life: import and warm what a reference worker imports, say Ready, then fork on request."""
    from kernelbench.evaluation.channel import Blobs, Channel, ChannelClosed, ProtocolError

    control = Channel.from_fd(fd)
    try:
        import torch  # noqa: F401

        # (a direct start asks once, after its steps: anything that spoiled the forks, torch's import too, sends it
        # careful, which then says what)
        fault = _fork_fault() if careful else 0
        if fault:
            raise RuntimeError(f"importing torch left the template's forks unable to use CUDA: {FORK_FAULTS[fault]}")
        left = _preload(device, careful)
        if left is None:
            _start_again_careful(fd, device)  # (never returns: an exec that fails raises)
        # (the steps taken directly were checked after them, in _preload; a careful start checks its sum here)
        fault = _fork_fault() if careful else 0
        if fault:
            raise RuntimeError(f"the template's forks cannot use CUDA: {FORK_FAULTS[fault]}")
        from kernelbench.evaluation.worker.process import _freeze_collected

        _freeze_collected()  # what the children inherit stays shared with the template (no copy made by the collector)
        control.send(protocol.encode_reply(protocol.Ready(pid=os.getpid())))
        control.send({"ok": True, "left_to_forks": left})
    except BaseException as e:
        from kernelbench.evaluation.worker.process import _error_reply

        control.send(protocol.encode_reply(_error_reply(e, "start")))
        return
    while True:
        try:
            msg, blobs = control.recv()
        except (ChannelClosed, ProtocolError):
            return  # the parent has gone: children exit on their own when their channels close
        fds = blobs.take_fds() if isinstance(blobs, Blobs) else []
        cmd = msg.get("cmd")
        try:
            if cmd == "exit":
                return
            if cmd == "fork":
                cwd = msg.get("cwd")
                if len(fds) != FORK_FDS or not isinstance(cwd, str):
                    control.send({"ok": False, "error": f"a fork takes {FORK_FDS} descriptors and a folder"})
                    continue
                if _python_threads() != 1:
                    control.send({"ok": False, "error": f"the template runs {_python_threads()} threads"})
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    pid = os.fork()
                except OSError as e:  # (a process limit, memory): this fork fails, the template stays
                    control.send({"ok": False, "error": f"fork failed: {e}"})
                    continue
                if pid == 0:
                    _fork_child(control, fds, cwd, device)
                control.send({"ok": True, "pid": pid})
            elif cmd == "reap":
                # Once, when the child has exited: the parent keeps the status (a pid reaped here may be reused).
                # "gone": not (or no longer) a child of the template, so no status will ever come.
                pid, status, gone = msg.get("pid"), None, False
                if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
                    try:
                        got, raw = os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        got, raw, gone = 0, 0, True
                    if got == pid:
                        status = os.waitstatus_to_exitcode(raw)
                else:
                    gone = True
                control.send({"ok": True, "returncode": status, "gone": gone})
            else:
                control.send({"ok": False, "error": f"unknown template command {cmd!r}"})
        finally:
            for f in fds:  # the child has its copies; the template keeps none
                try:
                    os.close(f)
                except OSError:
                    pass


def main(argv: list[str] | None = None) -> None:
    """``python -m kernelbench.evaluation.worker --template ...`` (``worker/__main__.py``)."""
    p = argparse.ArgumentParser(prog="kernelbench-worker --template")
    p.add_argument("--template", action="store_true", required=True)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--role", choices=["reference"], required=True, help="only reference workers are forked")
    p.add_argument("--device", required=True)
    p.add_argument(CAREFUL_FLAG, action="store_true", help="try each preloading step in a scout fork first")
    args = p.parse_args(argv)
    try:
        serve_template(args.device, args.fd, careful=args.careful)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
