"""Where a worker's Init goes (session 19: reference workers' Init hung with KB_FINGERPRINT=fused on two H200s).

Starts one worker the way the evaluator does, sends Init, and if no reply comes within --wait seconds sends it
SIGABRT (PYTHONFAULTHANDLER=1 makes it print every thread's stack) and prints its output's tail.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelbench.evaluation import protocol  # noqa: E402
from kernelbench.evaluation.channel import ChannelTimeout  # noqa: E402
from kernelbench.evaluation.parent.workers import send_init, start_worker  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", default="reference")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--wait", type=float, default=40.0)
    p.add_argument("--fingerprint", default="fused")
    a = p.parse_args()
    env = {"PYTHONFAULTHANDLER": "1", "KB_FINGERPRINT": a.fingerprint}
    t0 = time.monotonic()
    w = start_worker(a.role, a.device, init=False, env_extra=env)
    print(f"{a.role} {a.fingerprint}: started in {time.monotonic() - t0:.2f} s", flush=True)
    t0 = time.monotonic()
    send_init(w)
    try:
        header, _ = w.channel.recv(a.wait)
        msg, _ = protocol.decode_reply(header, protocol.InitReply)
        print(f"{a.role} {a.fingerprint}: Init answered in {time.monotonic() - t0:.2f} s: {type(msg).__name__}",
              flush=True)
        if isinstance(msg, protocol.ErrorReply):
            print(msg.message, msg.traceback)
        w.close()
        return 0
    except ChannelTimeout:
        print(f"{a.role} {a.fingerprint}: no Init reply after {a.wait} s; SIGABRT for stacks", flush=True)
        os.kill(w.proc.pid, signal.SIGABRT)
        time.sleep(3)
        print(w.output_tail(20000))
        w.kill()
        return 1


if __name__ == "__main__":
    sys.exit(main())
