"""Timing wheels and SystemTimer on a mock clock (chapter notes §6, acceptance test 23)."""
from __future__ import annotations

import random
import threading

import pytest

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.purgatory.delay_queue import DelayQueue
from kafka_edu.server.purgatory.system_timer import Placement, SystemTimer, TimerShutdownError
from kafka_edu.server.purgatory.timer_task_list import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList


class Recorder(TimerTask):
    """Records the mock time at which it ran."""

    def __init__(self, name: str, delay_ms: int, clock: MockTime, ran: dict):
        super().__init__(delay_ms)
        self.name, self.clock, self.ran = name, clock, ran

    def run(self) -> None:
        self.ran[self.name] = self.clock.milliseconds()


@pytest.fixture
def clock():
    return MockTime(start_ms=0)


@pytest.fixture
def timer(clock):
    t = SystemTimer("test", tick_ms=1, wheel_size=20, start_ms=0, time=clock)
    yield t
    t.shutdown()


def step_to(timer: SystemTimer, clock: MockTime, now: int) -> None:
    clock.set_milliseconds(now)
    while timer.advance_clock(0):
        pass
    timer.await_executed()


def test_15ms_task_lands_in_level_1_bucket_15(timer, clock):
    task = Recorder("t15", 15, clock, {})
    timer.add(task)
    assert timer.locate(task) == Placement(level=1, tick_ms=1, bucket=15, bucket_expiration_ms=15)
    assert len(timer.wheels()) == 1
    assert timer.delay_queue.expirations() == [15]


def test_500ms_task_goes_to_level_3_then_level_2_and_runs_at_500(timer, clock):
    ran = {}
    task = Recorder("t500", 500, clock, ran)
    timer.add(task)
    placement = timer.locate(task)
    assert placement.level == 3 and placement.tick_ms == 400 and placement.bucket_expiration_ms == 400
    levels = timer.wheels()
    assert [(w.level, w.tick_ms, w.interval) for w in levels] == [(1, 1, 20), (2, 20, 400), (3, 400, 8000)]

    step_to(timer, clock, 400)
    placement = timer.locate(task)
    assert (placement.level, placement.tick_ms, placement.bucket_expiration_ms) == (2, 20, 500)
    assert ran == {}

    step_to(timer, clock, 499)
    assert ran == {} and timer.size == 1
    step_to(timer, clock, 500)
    assert ran == {"t500": 500} and timer.size == 0


def test_445ms_task_is_demoted_400_440_445(timer, clock):
    ran = {}
    task = Recorder("t445", 445, clock, ran)
    timer.add(task)
    path = [timer.locate(task).bucket_expiration_ms]
    for now in (400, 440):
        step_to(timer, clock, now)
        path.append(timer.locate(task).bucket_expiration_ms)
    assert path == [400, 440, 445]
    assert [timer.locate(task).level] == [1]
    step_to(timer, clock, 444)
    assert ran == {}
    step_to(timer, clock, 445)
    assert ran == {"t445": 445}


def test_delay_zero_runs_immediately(timer, clock):
    ran = {}
    timer.add(Recorder("now", 0, clock, ran))
    timer.await_executed()
    assert ran == {"now": 0} and timer.size == 0 and timer.delay_queue.expirations() == []


def test_cancelled_task_never_runs_and_size_drops(timer, clock):
    ran = {}
    keep, drop = Recorder("keep", 15, clock, ran), Recorder("drop", 15, clock, ran)
    timer.add(keep)
    timer.add(drop)
    assert timer.size == 2
    drop.cancel()
    assert timer.size == 1 and timer.locate(drop) is None
    step_to(timer, clock, 15)
    step_to(timer, clock, 100)
    assert ran == {"keep": 15}
    assert timer.size == 0


def test_cancelled_in_overflow_wheel_never_runs(timer, clock):
    ran = {}
    task = Recorder("far", 3000, clock, ran)
    timer.add(task)
    step_to(timer, clock, 2800)           # demoted at least once
    task.cancel()
    step_to(timer, clock, 5000)
    assert ran == {} and timer.size == 0


def test_readding_a_task_moves_it_instead_of_duplicating(timer, clock):
    ran = {}
    task = Recorder("twice", 10, clock, ran)
    timer.add(task)
    clock.set_milliseconds(5)
    timer.add(task)                        # now due at 15, the old entry is detached
    assert timer.size == 1
    step_to(timer, clock, 10)
    assert ran == {}
    step_to(timer, clock, 15)
    assert ran == {"twice": 15}


def test_many_tasks_run_exactly_at_their_deadline(clock):
    rng = random.Random(7)
    timer = SystemTimer("bulk", tick_ms=1, wheel_size=8, start_ms=0, time=clock)
    try:
        ran = {}
        tasks = []
        for i in range(300):
            task = Recorder(f"t{i}", rng.randrange(0, 2000), clock, ran)
            tasks.append(task)
            timer.add(task)
        cancelled = set(rng.sample(range(300), 40))
        for i in cancelled:
            tasks[i].cancel()
        for now in range(2001):
            step_to(timer, clock, now)
        expected = {t.name: t.delay_ms for i, t in enumerate(tasks) if i not in cancelled}
        assert ran == expected
        assert timer.size == 0
    finally:
        timer.shutdown()


def test_advance_clock_waits_for_the_mock_clock(timer, clock):
    ran = {}
    timer.add(Recorder("later", 50, clock, ran))
    result = []
    waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(10_000)))
    waiter.start()
    clock.sleep(50)
    waiter.join(5)
    assert result == [True]
    timer.await_executed()
    assert ran == {"later": 50}


def test_advance_clock_times_out_on_mock_time(timer, clock):
    result = []
    waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(100)))
    waiter.start()
    clock.sleep(100)
    waiter.join(5)
    assert result == [False]


def test_shutdown_wakes_a_waiting_advance_clock_and_refuses_new_tasks(clock):
    timer = SystemTimer("stop", time=clock, start_ms=0)
    result = []
    waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(1_000_000)))
    waiter.start()
    timer.shutdown()
    waiter.join(5)
    assert result == [False]
    with pytest.raises(TimerShutdownError):
        timer.add(Recorder("late", 5, clock, {}))


def test_real_clock_timer_fires():
    timer = SystemTimer("real", tick_ms=1, wheel_size=20)
    done = threading.Event()

    class Fire(TimerTask):
        def run(self):
            done.set()

    try:
        timer.add(Fire(20))
        while not done.is_set():
            timer.advance_clock(200)
        assert timer.size == 0
    finally:
        timer.shutdown()


def test_negative_delay_is_rejected():
    with pytest.raises(ValueError):
        Recorder("bad", -1, MockTime(), {})


def test_delay_queue_skips_buckets_that_moved_on(clock):
    queue, counter = DelayQueue(clock), TaskCounter()
    bucket = TimerTaskList(counter)
    bucket.set_expiration(5)
    queue.offer(bucket)
    bucket.set_expiration(25)             # reused for a later tick before being polled
    queue.offer(bucket)
    clock.set_milliseconds(10)
    assert queue.poll() is None
    clock.set_milliseconds(25)
    assert queue.poll() is bucket
    assert queue.poll() is None and len(queue) == 0


def test_task_list_add_remove_and_flush_keep_the_counter():
    counter = TaskCounter()
    first, second = TimerTaskList(counter), TimerTaskList(counter)
    tasks = [Recorder(f"t{i}", 1, MockTime(), {}) for i in range(5)]
    entries = [TimerTaskEntry(t, 1) for t in tasks]
    for e in entries:
        first.add(e)
    assert counter.get() == 5
    second.add(entries[0])                 # moving an entry keeps the count
    assert counter.get() == 5 and len(first.entries()) == 4
    tasks[1].cancel()
    assert counter.get() == 4
    flushed = []
    first.flush(flushed.append)
    assert [e.task.name for e in flushed] == ["t2", "t3", "t4"]
    assert counter.get() == 1
