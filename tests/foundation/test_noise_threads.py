"""The secure source under threads and forks (issue 14 item 7).

Before the fix, the shared AES-CTR encryptor raised ``RuntimeError: Already borrowed`` when two
threads drew at once, and threads shared one small-draw buffer (so two threads could be handed
the same words). Now each thread has its own stream and buffer, and a forked child re-keys.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import fugu
from fugu.noise import RandomSource, default_source, discrete_laplace

N_THREADS = 4


def _run_threads(work, n_threads: int = N_THREADS) -> list:
    """Run ``work(i)`` in ``n_threads`` threads that start together; re-raise any error."""
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_four_threads_release_concurrently_on_the_default_source() -> None:
    """4 threads × 60 releases through the shared default source: no error (the old code raised
    ``RuntimeError: Already borrowed`` within a few calls), every release correct in shape."""
    dom = fugu.Domain([fugu.Ordinal("age", 0, 999)])
    hist = fugu.Histogram.from_records({"age": np.arange(1000)}, dom)

    def work(i: int) -> list[np.ndarray]:
        outs = []
        for _ in range(60):
            outs.append(fugu.central.laplace(hist, epsilon=1.0).counts)
            outs.append(discrete_laplace(3.0, size=70_000))  # large draws: the AES stream
        return outs

    results = _run_threads(work)
    assert all(len(r) == 120 for r in results)
    assert all(o.shape in ((1000,), (70_000,)) for r in results for o in r)


def test_threads_never_receive_the_same_words() -> None:
    """Small draws come from per-thread buffers: 4 threads × 20,000 draws of 3 words share no
    word (a repeat among 240,000 uniform 64-bit words has probability below 2e-9)."""
    src = RandomSource()

    def work(i: int) -> np.ndarray:
        return np.concatenate([src.bits64(3) for _ in range(20_000)])

    words = np.concatenate(_run_threads(work))
    assert np.unique(words).size == words.size


def test_seeded_source_is_thread_safe() -> None:
    src = RandomSource(seed=5)
    outs = _run_threads(lambda i: discrete_laplace(2.0, size=50_000, rng=src))
    assert all(o.shape == (50_000,) for o in outs)


def _child_draws(draw) -> np.ndarray:
    """Run ``draw()`` in a forked child and return its words (as uint64)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            data = np.ascontiguousarray(draw()).astype(np.int64).tobytes()
            os.write(w, len(data).to_bytes(8, "little") + data)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 20):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    raw = b"".join(chunks)
    n = int.from_bytes(raw[:8], "little")
    return np.frombuffer(raw[8 : 8 + n], dtype=np.int64)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("n_words", [4, 100_000])
def test_forked_child_and_parent_draw_different_bits(n_words: int) -> None:
    """After fork the child re-keys its AES stream and drops buffered words: the child's next
    words differ from the parent's next words, for buffered (small) and streamed (large) draws."""
    src = default_source()
    src.bits64(3)  # leave words in the parent's buffer and a live AES stream
    discrete_laplace(1.0, size=100_000)
    child = _child_draws(lambda: src.bits64(n_words).view(np.int64))
    parent = src.bits64(n_words).view(np.int64)
    assert child.size == n_words
    assert not np.array_equal(child, parent)
    # no word in common at all (chance of a coincidence < 1e-9)
    assert np.intersect1d(child, parent).size == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_noise_differs_from_parent() -> None:
    discrete_laplace(1e6, size=10)
    child = _child_draws(lambda: discrete_laplace(1e6, size=1000))
    parent = discrete_laplace(1e6, size=1000)
    assert (child == parent).mean() < 0.05  # equal draws at scale 1e6: about 3e-7 each
