"""Several JAX processes on localhost, as several hosts of one job: what the
many-host tests and examples' tests run them with."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(argvs: list[list[str]], timeout: float = 300) -> list[str]:
    """Runs one process per argv at once, one CPU device each; asserts each
    exits 0 and returns their stdouts."""
    n = len(argvs)
    # One CPU device a process: fewer threads that must meet in each all-gather
    # on a 2-core machine (see test_example.py on XLA's 40 s rendezvous).
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    # Output goes to files, not pipes: a process blocked writing to a full
    # pipe nobody reads yet would never reach jax's shutdown barrier, and the
    # others would wait there for it.
    with tempfile.TemporaryDirectory() as tmp:
        logs = [(open(f"{tmp}/{i}.out", "w+"), open(f"{tmp}/{i}.err", "w+")) for i in range(n)]
        procs = [
            subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
            for argv, (out, err) in zip(argvs, logs, strict=True)
        ]
        try:
            for p in procs:
                p.wait(timeout=timeout)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        outs = []
        for out, err in logs:
            out.seek(0)
            err.seek(0)
            outs.append((out.read(), err.read()))
            out.close()
            err.close()
    for i, (p, (_out, err_text)) in enumerate(zip(procs, outs, strict=True)):
        assert p.returncode == 0, f"process {i} of {n}: {err_text[-3000:]}"
    return [out for out, _ in outs]
