"""DelayedOperation and DelayedOperationPurgatory (chapter notes §4.4, acceptance test 24)."""
from __future__ import annotations

import threading
import time as real_time

import pytest

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.purgatory.delayed_operation import DelayedOperation, DelayedOperationPurgatory


class Waiting(DelayedOperation):
    """Completes when `condition()` is true; counts both callbacks."""

    def __init__(self, delay_ms: int, condition):
        super().__init__(delay_ms)
        self.condition = condition
        self.completions = 0
        self.expirations = 0
        self.tries = 0
        self.done = threading.Event()

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.condition() else False

    def on_complete(self) -> None:
        self.completions += 1
        self.done.set()

    def on_expiration(self) -> None:
        self.expirations += 1


@pytest.fixture
def clock():
    return MockTime(start_ms=0)


@pytest.fixture
def purgatory(clock):
    p = DelayedOperationPurgatory("test", broker_id=1, reaper_enabled=False, time=clock)
    yield p
    p.shutdown()


def expire(purgatory: DelayedOperationPurgatory, clock: MockTime, now: int) -> None:
    clock.set_milliseconds(now)
    purgatory.advance_clock(0)
    purgatory.timeout_timer.await_executed()


# --- acceptance test 24: exactly-once completion under a race --------------------------------

def test_race_between_16_try_completers_and_the_timeout_completes_once():
    purgatory = DelayedOperationPurgatory("race", broker_id=0)
    outcomes = set()
    try:
        for i in range(24):
            flag = threading.Event()
            op = Waiting(50, flag.is_set)
            assert purgatory.try_complete_else_watch(op, ["k"]) is False
            wins = []

            def hammer(op=op, wins=wins):
                while not op.is_completed:
                    if op.safe_try_complete():
                        wins.append(True)

            threads = [threading.Thread(target=hammer) for _ in range(16)]
            for t in threads:
                t.start()
            real_time.sleep(0.01 + 0.005 * (i % 12))
            flag.set()
            for t in threads:
                t.join(10)
            assert not any(t.is_alive() for t in threads)
            purgatory.timeout_timer.await_executed()
            assert op.completions == 1
            assert op.expirations + len(wins) == 1, (op.expirations, len(wins))
            outcomes.add("timer" if op.expirations else "try_complete")
    finally:
        purgatory.shutdown()
    assert outcomes  # which path won varies; the invariant above held every time


def test_condition_first_means_no_expiration(purgatory, clock):
    flag = threading.Event()
    op = Waiting(50, flag.is_set)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    flag.set()
    assert purgatory.check_and_complete("k") == 1
    expire(purgatory, clock, 100)
    assert (op.completions, op.expirations) == (1, 0)
    assert not op.safe_try_complete() and not op.force_complete()


def test_timeout_first_means_one_expiration_and_later_tries_fail(purgatory, clock):
    flag = threading.Event()
    op = Waiting(50, flag.is_set)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    expire(purgatory, clock, 49)
    assert (op.completions, op.expirations) == (0, 0)
    expire(purgatory, clock, 50)
    assert (op.completions, op.expirations) == (1, 1)
    flag.set()
    assert purgatory.check_and_complete("k") == 0
    assert (op.completions, op.expirations) == (1, 1)


def test_concurrent_force_complete_wins_once():
    op = Waiting(1000, lambda: True)
    barrier = threading.Barrier(16)
    results = []

    def go():
        barrier.wait()
        results.append(op.force_complete())

    threads = [threading.Thread(target=go) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and op.completions == 1


# --- tryCompleteElseWatch ---------------------------------------------------------------------

def test_completes_at_once_without_watching(purgatory):
    op = Waiting(100, lambda: True)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert purgatory.watched() == 0 and purgatory.delayed() == 0
    assert op.completions == 1


def test_condition_turning_true_while_watching_is_not_missed(purgatory):
    """The second try of tryCompleteElseWatch catches a change between try #1 and watching."""
    calls = []

    def condition():
        calls.append(1)
        return len(calls) >= 2          # false on the first try, true on the second

    op = Waiting(100, condition)
    assert purgatory.try_complete_else_watch(op, ["a"]) is True
    assert op.completions == 1
    assert purgatory.delayed() == 0     # never entered the timer


def test_operation_completed_by_someone_else_stops_watching(purgatory):
    op = Waiting(100, lambda: False)
    op.force_complete()
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
    assert purgatory.watched() == 0 and purgatory.delayed() == 0


def test_watch_keys_must_not_be_empty(purgatory):
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(Waiting(10, lambda: False), [])


def test_multi_key_operation_and_watchers_removal(purgatory):
    state = {"a": False, "b": False}
    op = Waiting(1000, lambda: state["a"] and state["b"])
    other = Waiting(1000, lambda: state["b"])
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert not purgatory.try_complete_else_watch(other, ["b"])
    assert purgatory.watch_counts() == {"a": 1, "b": 2}
    assert purgatory.watched() == 3 and purgatory.delayed() == 2
    assert purgatory.estimated_total_operations == 2

    state["a"] = True
    assert purgatory.check_and_complete("a") == 0
    state["b"] = True
    assert purgatory.check_and_complete("b") == 2
    assert op.completions == other.completions == 1
    assert purgatory.watch_counts() == {"a": 1}       # op still listed under "a"
    assert purgatory.delayed() == 0                    # both left the timer
    assert purgatory.check_and_complete("a") == 0
    assert purgatory.watch_counts() == {}
    assert purgatory.check_and_complete("missing") == 0


def test_purge_removes_expired_operations_over_the_threshold(clock):
    purgatory = DelayedOperationPurgatory("purge", purge_interval=3, reaper_enabled=False, time=clock)
    try:
        ops = [Waiting(10, lambda: False) for _ in range(5)]
        for i, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [f"k{i % 2}"])
        assert purgatory.watched() == 5
        expire(purgatory, clock, 10)
        assert all(op.expirations == 1 for op in ops)
        assert purgatory.watched() == 5                  # expiry does not touch watch lists
        assert purgatory.advance_clock(0) == 5
        assert purgatory.watched() == 0 and purgatory.watch_counts() == {}
        assert purgatory.estimated_total_operations == 0
    finally:
        purgatory.shutdown()


def test_no_purge_under_the_threshold(clock):
    purgatory = DelayedOperationPurgatory("purge", purge_interval=3, reaper_enabled=False, time=clock)
    try:
        for _ in range(3):
            purgatory.try_complete_else_watch(Waiting(10, lambda: False), ["k"])
        expire(purgatory, clock, 10)
        assert purgatory.advance_clock(0) == 0
        assert purgatory.watched() == 3
    finally:
        purgatory.shutdown()


def test_reaper_expires_operations_when_the_mock_clock_moves(clock):
    purgatory = DelayedOperationPurgatory("reaped", broker_id=7, time=clock)
    try:
        names = [t.name for t in threading.enumerate()]
        assert "ExpirationReaper-7-reaped" in names
        op = Waiting(300, lambda: False)
        purgatory.try_complete_else_watch(op, ["k"])
        clock.sleep(299)
        purgatory.timeout_timer.await_executed()
        assert op.completions == 0
        clock.sleep(1)
        assert op.done.wait(5)
        assert (op.completions, op.expirations) == (1, 1)
    finally:
        purgatory.shutdown()
    assert "ExpirationReaper-7-reaped" not in [t.name for t in threading.enumerate()]


def test_shutdown_with_pending_operations_returns(clock):
    purgatory = DelayedOperationPurgatory("stop", time=clock)
    op = Waiting(10_000, lambda: False)
    purgatory.try_complete_else_watch(op, ["k"])
    purgatory.shutdown()
    assert op.completions == 0


def test_many_operations_many_threads_each_completed_once(clock):
    purgatory = DelayedOperationPurgatory("busy", reaper_enabled=False, time=clock)
    try:
        ready = {f"tp{i}": False for i in range(8)}
        ops = [Waiting(1000, (lambda k=f"tp{i % 8}": ready[k])) for i in range(400)]
        for i, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [f"tp{i % 8}", f"tp{(i + 1) % 8}"])
        for key in ready:
            ready[key] = True

        def poke():
            for key in ready:
                purgatory.check_and_complete(key)

        threads = [threading.Thread(target=poke) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(op.completions == 1 for op in ops)
        assert purgatory.delayed() == 0 and purgatory.watched() == 0
        expire(purgatory, clock, 2000)
        assert all(op.expirations == 0 for op in ops)
    finally:
        purgatory.shutdown()


# --- Beyond 0.10 (Kafka 1.1): an event never waits for another completer --------------------------

class PausingOnce(Waiting):
    """Once `armed`, its next try evaluates the condition, then pauses with the operation's lock held."""

    def __init__(self, delay_ms: int, condition):
        super().__init__(delay_ms, condition)
        self.armed, self.checked, self.resume = False, threading.Event(), threading.Event()

    def try_complete(self) -> bool:
        self.tries += 1
        holds = self.condition()
        if self.armed:
            self.armed = False
            self.checked.set()
            self.resume.wait(5)
        return self.force_complete() if holds else False


def test_an_event_finding_the_lock_taken_returns_and_the_holder_tries_again(purgatory):
    ready = threading.Event()
    op = PausingOnce(1000, ready.is_set)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    op.tries, op.armed = 0, True
    holder_result = []
    holder = threading.Thread(target=lambda: holder_result.append(purgatory.check_and_complete("k")), daemon=True)
    holder.start()
    assert op.checked.wait(5)                   # the holder found the condition false and still holds the lock
    ready.set()
    started = real_time.monotonic()
    assert purgatory.check_and_complete("k") == 0                 # the event: it did not wait for the lock
    assert real_time.monotonic() - started < 1 and op.completions == 0
    op.resume.set()
    holder.join(5)
    assert not holder.is_alive() and holder_result == [1]         # the holder's second try completed it
    assert op.tries == 2 and op.completions == 1 and purgatory.watch_counts() == {}


def test_a_try_that_finds_a_borrowed_lock_held_by_its_own_thread_runs(purgatory):
    """DelayedJoin and DelayedHeartbeat borrow their group's re-entrant lock; the coordinator re-tests them
    while holding it, and then the try is made at once."""
    shared = threading.RLock()
    op = Waiting(1000, lambda: True)
    op.lock = shared
    with shared:
        assert op.maybe_try_complete() and op.completions == 1
