"""Batches view infeed's pooled, aligned buffers; threads and Ctrl-C."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import LM, LM_SPEC, lm_pipeline

import infeed
from infeed import _infeed


def owner(array: np.ndarray) -> _infeed.Buffer:
    """The infeed buffer an array views (through any chain of views)."""
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, _infeed.Buffer)
    return base


def test_arrays_view_pooled_aligned_buffers_without_copy():
    batch = next(iter(lm_pipeline()))
    for name, array in batch.items():
        buf = owner(array)
        assert buf.pooled, name
        assert array.ctypes.data == buf.address, name  # a view, not a copy
        assert buf.address % _infeed.ALIGN == 0 and _infeed.ALIGN == 64
        assert buf.nbytes == array.nbytes <= buf.capacity
        assert array.flags.c_contiguous


def test_a_buffer_returns_to_the_pool_when_its_last_view_dies():
    # One worker, batches of one shape: the pool hands a dropped buffer back
    # (last in, first out), so addresses recur once arrays are dropped.
    p = (
        infeed.Pipeline.from_files([LM])
        .repeat(None)
        .parse(LM_SPEC)
        .fixed_length(512)
        .batch(8)
        .threads(1)
        .prefetch(1)
    )
    it = iter(p)
    seen: set[int] = set()
    reused = 0
    for _ in range(50):
        batch = next(it)
        addresses = {owner(a).address for a in batch.values()}
        reused += len(addresses & seen)
        seen |= addresses
        del batch
    assert reused > 0
    # The addresses come from a small set: the pool, not fresh allocations.
    assert len(seen) <= 4 * 8


def test_a_kept_array_is_never_overwritten():
    it = iter(
        infeed.Pipeline.from_files([LM])
        .shuffle(100)
        .repeat(None)
        .parse(LM_SPEC)
        .fixed_length(512)
        .batch(8)
        .threads(2)
    )
    kept = next(it)["input_ids"]
    view = kept[2:5, 10:]  # a view of a view keeps the buffer too
    copy = kept.copy()
    address = kept.ctypes.data
    for _ in range(1000):
        batch = next(it)
        assert all(owner(a).address != address for a in batch.values())
    np.testing.assert_array_equal(kept, copy)
    del kept
    gc.collect()
    np.testing.assert_array_equal(view, copy[2:5, 10:])


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def test_dropping_iterators_stops_their_threads():
    p = lm_pipeline().repeat(None).threads(2)
    before = thread_count()
    for i in range(100):
        it = iter(p)
        next(it)
        if i % 2:
            it.close()
        del it
    gc.collect()
    assert thread_count() == before


def test_close_keeps_handed_out_arrays_and_state():
    it = iter(lm_pipeline())
    batch = next(it)
    copy = batch["input_ids"].copy()
    state = it.get_state()
    it.close()
    np.testing.assert_array_equal(batch["input_ids"], copy)
    assert it.get_state() == state


STALL = """
import os, signal, socket, threading, time
import infeed
# A process started in the background by a non-interactive shell (nohup, `&`
# in a script) inherits SIGINT ignored, and Python then leaves it ignored:
# these scripts are about what infeed does with an interrupt, so they take
# the default handler whatever the caller's shell did.
signal.signal(signal.SIGINT, signal.default_int_handler)
# A server that takes connections and never answers: next() waits forever.
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(16)
url = f"http://127.0.0.1:{srv.getsockname()[1]}/never.tfrecord"
it = iter(infeed.Pipeline.from_files([url]).read_options(compression="none")
          .parse("a:var_len:int64").max_length(4).batch(1))
"""


EXIT = """
import sys
sys.stdout.flush()
os._exit(0)
"""


def run(script: str) -> str:
    out = subprocess.run(
        # os._exit: the reader stays blocked in its HTTP request until that
        # times out, and a normal exit would wait for it.
        [sys.executable, "-c", STALL + textwrap.dedent(script) + EXIT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_ctrl_c_while_waiting_raises_keyboard_interrupt_quickly():
    out = run(
        """
        sent = []
        def interrupt():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        threading.Timer(0.5, interrupt).start()
        try:
            next(it)
            print("no interrupt")
        except KeyboardInterrupt:
            print("interrupted after", time.monotonic() - sent[0])
        """
    )
    # The source never answers: only an interrupt handled while waiting
    # ends next(). How soon is the poll interval's (batches.rs), not a
    # figure a loaded machine could miss.
    words = out.split()
    assert words[:2] == ["interrupted", "after"], out


def test_gil_is_released_while_waiting():
    # Another Python thread counts while the main thread waits in next().
    out = run(
        """
        counter = [0]
        stop = threading.Event()
        def spin():
            while not stop.is_set():
                counter[0] += 1
        def stop_soon():
            time.sleep(0.6)
            stop.set()
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=spin).start()
        threading.Thread(target=stop_soon).start()
        try:
            next(it)
        except KeyboardInterrupt:
            pass
        print(counter[0])
        """
    )
    # stop_soon needs the GIL to send the interrupt that ends next(): had
    # next() held it, the script would never finish (the run's timeout).
    # The spinning thread counted meanwhile, at whatever speed it got.
    assert int(out.split()[-1]) > 0


def _os_sigint_handler() -> bytes:
    """SIGINT's handler as the kernel has it (``sigaction``), not as
    CPython's own table says: a library that installed a handler of its own
    would change this, and not ``signal.getsignal``. On Linux the handler is
    the struct's first field."""
    libc = ctypes.CDLL(None, use_errno=True)
    old = ctypes.create_string_buffer(512)  # larger than any libc's struct sigaction
    assert libc.sigaction(signal.SIGINT, None, old) == 0, ctypes.get_errno()
    return old.raw[: ctypes.sizeof(ctypes.c_void_p)]


@pytest.mark.skipif(sys.platform != "linux", reason="reads struct sigaction's Linux layout")
def test_sigint_handler_of_the_caller_still_works():
    # infeed installs no signal handler: the one the caller set is still the
    # kernel's after a pipeline ran, and still Python's.
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, handler)
    try:
        installed = _os_sigint_handler()
        it = iter(lm_pipeline())
        next(it)
        it.close()
        assert _os_sigint_handler() == installed
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_cpu_affinity_keeps_every_pipeline_thread_on_its_cores(tmp_path):
    # 40 copies of the sample in one file, repeated without end: its shard
    # readers are still reading when the threads are listed. A thread takes
    # its name when it first runs, and on one core the second worker may not
    # have run by the first batch: the listing is taken again until both
    # workers have (a bound on liveness only, far above any run's). Its
    # index, found beside it, frames it: read from a local file, which starts
    # no I/O runtime (whose threads no pipeline pins).
    big = tmp_path / "big.tfrecord"
    big.write_bytes(LM.read_bytes() * 40)
    infeed.build_index([str(big)])
    # In a fresh process, so that no other test's pipeline threads are seen.
    script = textwrap.dedent(
        f"""
        import json, os, pathlib, time
        import infeed
        core = min(os.sched_getaffinity(0))
        spec = {{"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")}}
        def pipeline(pinned):
            p = infeed.Pipeline.from_files([{str(big)!r}]).repeat().shuffle(64).seed(1)
            p = p.parse(spec).max_length(512).batch(8)
            return p.cpu_affinity([core]).threads(2) if pinned else p
        it = iter(pipeline(True))
        first = next(it)
        def listed():
            seen = []
            for task in pathlib.Path("/proc/self/task").iterdir():
                name = (task / "comm").read_text().strip()
                if name.startswith("infeed-"):
                    for line in (task / "status").read_text().splitlines():
                        if line.startswith("Cpus_allowed_list:"):
                            seen.append([name, line.split(":")[1].strip()])
            return seen
        deadline = time.monotonic() + 60
        seen = listed()
        while [n for n, _ in seen].count("infeed-worker") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            seen = listed()
        same = all((first[k] == next(iter(pipeline(False)))[k]).all() for k in first)
        print(json.dumps({{"core": core, "seen": sorted(seen), "same": bool(same)}}))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    names = [name for name, _ in report["seen"]]
    assert names.count("infeed-worker") == 2, report
    assert "infeed-records" in names and "infeed-shard" in names, report
    assert {cpus for _, cpus in report["seen"]} == {str(report["core"])}, report
    assert report["same"]


def test_cpu_affinity_refuses_cores_the_process_may_not_use():
    p = lm_pipeline().cpu_affinity([1 << 20])
    with pytest.raises(infeed.SpecError, match="cpu_affinity"):
        next(iter(p))
