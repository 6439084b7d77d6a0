"""attn.compile's cache ($ATTN_CACHE_DIR) shared by processes and threads at once.

Two processes, each with eight threads, compile and load the same IR on a cold cache,
round after round: every round starts from an empty cache directory, all sixteen threads
call attn.compile together, run the kernel, meet at a barrier across both processes, and
call attn.compile again. One of them compiles, the others wait for it and load what it
published; an artifact, once published, is never replaced, so no thread finds the file
it loaded "changed on disk". (Before the cache took a lock, each process compiled and
os.replace()d the artifact, and the second attn.compile of the process that had loaded
the first copy failed.)
"""
import multiprocessing
import os
import queue
import threading
import time
import traceback

import torch

from conftest import EXAMPLES

PROCESSES = 2
THREADS = 8
ROUNDS = 10
SOFTMAX_IR = (EXAMPLES / "softmax.mlir").read_text()


def _compile_and_run(q, k, v, expected):
    """attn.compile + a call, the output checked against torch's softmax attention;
    returns the artifact loaded: its path and inode."""
    import attn

    # f64 only: the cheapest softmax artifact to build (the f32 entry points take twice
    # as long), and each of the ROUNDS cold rounds builds it again.
    kernel = attn.compile(SOFTMAX_IR, dtypes=("f64",))
    out = kernel(q, k, v)
    error = (out - expected).abs().max().item()
    assert error < 1e-12, f"output differs from torch's by {error}"
    return kernel.path, os.stat(kernel.path).st_ino


def _worker(index, root, process_barrier, results):
    """One process: ROUNDS rounds of THREADS threads, each compiling twice per round."""
    errors, loaded = [], set()
    try:
        torch.set_num_threads(1)
        generator = torch.Generator().manual_seed(index)
        q, k, v = (torch.randn(1, 2, 16, 8, generator=generator, dtype=torch.float64)
                   for _ in range(3))
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        for r in range(ROUNDS):
            os.environ["ATTN_CACHE_DIR"] = os.path.join(root, f"round{r}")  # cold: new, empty
            thread_barrier = threading.Barrier(THREADS + 1)

            def thread(t, r=r, thread_barrier=thread_barrier):
                try:
                    loaded.add(_compile_and_run(q, k, v, expected))
                    thread_barrier.wait()  # the main thread meets the other process here
                    thread_barrier.wait()
                    loaded.add(_compile_and_run(q, k, v, expected))
                except threading.BrokenBarrierError:
                    pass  # another thread failed: its error is reported
                except Exception:  # noqa: BLE001 (reported to the parent)
                    errors.append(f"process {index} round {r} thread {t}:\n{traceback.format_exc()}")
                    thread_barrier.abort()

            process_barrier.wait()
            threads = [threading.Thread(target=thread, args=(t,)) for t in range(THREADS)]
            for th in threads:
                th.start()
            try:
                thread_barrier.wait()
                process_barrier.wait()
                thread_barrier.wait()
            except threading.BrokenBarrierError:
                pass
            for th in threads:
                th.join()
            if errors:
                process_barrier.abort()
                break
    except Exception:  # noqa: BLE001
        errors.append(f"process {index}:\n{traceback.format_exc()}")
        process_barrier.abort()
    results.put((index, errors, sorted(loaded)))


def test_processes_and_threads_share_a_cold_cache(attn_mod, tmp_path):
    context = multiprocessing.get_context("spawn")
    process_barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [context.Process(target=_worker, args=(i, str(tmp_path), process_barrier, results))
                 for i in range(PROCESSES)]
    for p in processes:
        p.start()
    reports, deadline = [], time.monotonic() + 900
    while len(reports) < PROCESSES:
        try:
            reports.append(results.get(timeout=5))
        except queue.Empty:
            crashed = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            assert not crashed, f"a worker process died (exit code {crashed[0]})"
            assert time.monotonic() < deadline, "the workers did not finish in 15 minutes"
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0, f"worker process exited with {p.exitcode}"
    errors = [e for _, errs, _ in reports for e in errs]
    assert not errors, "\n".join(errors[:3])
    # Each round's cache holds one artifact, the file (path and inode) that every thread
    # of both processes loaded: published once, never replaced.
    published = {(os.path.realpath(f), os.stat(f).st_ino)
                 for r in range(ROUNDS) for f in (tmp_path / f"round{r}").glob("*.so")}
    assert len(published) == ROUNDS, sorted(published)
    assert {artifact for _, _, report in reports for artifact in report} == published
    # Lock files go once their artifact is published; the build's scratch directories too.
    leftovers = [p.name for r in range(ROUNDS) for p in (tmp_path / f"round{r}").iterdir()
                 if p.suffix != ".so"]
    assert not leftovers, leftovers
