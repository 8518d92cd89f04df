"""`History.add` from several threads (the real path records from the world server's threads)."""

from __future__ import annotations

import itertools
import threading

from harness.history import History


def test_two_threads_appending_keep_records_in_time_order() -> None:
    # Thread A reads the clock, then is held up (as a preempted thread would be) until B has
    # appended or half a second passed. If the clock is read outside the lock, B's later time
    # is appended first and A's earlier one after it: time goes backwards in the history.
    counter = itertools.count(1)
    a_read = threading.Event()
    b_done = threading.Event()

    def clock() -> float:
        value = float(next(counter))
        if threading.current_thread().name == "A" and not a_read.is_set():
            a_read.set()
            b_done.wait(0.5)
        return value

    history = History(clock)

    def a() -> None:
        history.add("test.a")  # a namespace of its own: outside the vocabulary

    def b() -> None:
        a_read.wait(5)
        history.add("test.b")
        b_done.set()

    threads = [threading.Thread(target=a, name="A"), threading.Thread(target=b, name="B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    times = [r.time for r in history]
    assert sorted(times) == times, [r.describe() for r in history]
    assert [r.index for r in history] == [0, 1]
