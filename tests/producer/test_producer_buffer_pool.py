"""BufferPool: the memory cap, the free list of poolable buffers, FIFO waiters, max.block.ms."""
from __future__ import annotations

import threading
import time

import pytest
from external import wait_for

from kafka_edu.clients.producer.buffer_pool import BufferPool

KB16 = 16384


def blocked_allocation(pool: BufferPool, size: int, results: list, max_block_ms: int = 10_000) -> threading.Thread:
    """Start a thread that allocates `size` bytes; return once it is queued as a waiter."""
    queued = pool.queued()

    def run():
        try:
            results.append(pool.allocate(size, max_block_ms))
        except BaseException as e:   # the test inspects it
            results.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for(lambda: pool.queued() > queued or results)
    return thread


def test_four_poolable_buffers_then_the_fifth_blocks_until_one_returns():
    pool = BufferPool(65536, KB16)
    held = [pool.allocate(KB16, 0) for _ in range(4)]
    assert all(len(b) == KB16 for b in held)
    assert pool.available_memory == 0
    results: list = []
    thread = blocked_allocation(pool, KB16, results)
    assert pool.queued() == 1 and not results
    returned = held.pop()
    pool.deallocate(returned)
    thread.join(5)
    assert results == [returned] and results[0] is returned      # the very buffer, from the free list
    assert pool.queued() == 0


def test_waiters_are_served_first_come_first_served():
    pool = BufferPool(65536, KB16)
    held = [pool.allocate(KB16, 0) for _ in range(4)]
    order: list = []
    threads = []
    for name in "ABC":
        results: list = []
        threads.append(blocked_allocation(pool, KB16, results))
        threads[-1].name = name
        order.append((name, results))
    served = []
    for _ in range(3):
        pool.deallocate(held.pop())
        wait_for(lambda n=len(served) + 1: sum(1 for _, r in order if r) == n)
        served.extend(name for name, r in order if r and name not in served)
    assert served == ["A", "B", "C"]


def test_timeout_after_max_block_ms_leaves_the_pool_unchanged():
    pool = BufferPool(65536, KB16)
    held = [pool.allocate(KB16, 0) for _ in range(4)]
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="max.block.ms"):
        pool.allocate(KB16, 50)
    assert time.monotonic() - started >= 0.045
    assert pool.queued() == 0 and pool.available_memory == 0
    for b in held:
        pool.deallocate(b)
    assert pool.available_memory == 65536


def test_zero_max_block_fails_at_once_when_memory_is_short():
    pool = BufferPool(KB16, KB16)
    pool.allocate(KB16, 0)
    with pytest.raises(TimeoutError):
        pool.allocate(KB16, 0)


def test_a_request_larger_than_the_pool_fails_immediately():
    pool = BufferPool(65536, KB16)
    with pytest.raises(ValueError, match="70000"):
        pool.allocate(70_000, 10_000)


def test_non_poolable_buffers_go_back_to_unallocated_memory():
    pool = BufferPool(65536, KB16)
    big = pool.allocate(20_000, 0)
    assert len(big) == 20_000 and pool.unallocated_memory == 45_536
    pool.deallocate(big)
    assert pool.free_buffers == 0 and pool.unallocated_memory == 65536


def test_poolable_buffers_are_recycled_and_freed_up_for_other_sizes():
    pool = BufferPool(65536, KB16)
    buffers = [pool.allocate(KB16, 0) for _ in range(2)]
    for b in buffers:
        pool.deallocate(b)
    assert pool.free_buffers == 2 and pool.unallocated_memory == 32768
    assert pool.allocate(KB16, 0) is buffers[0]                   # recycled, oldest first
    big = pool.allocate(40_000, 0)                                 # frees the last pooled buffer into available
    assert len(big) == 40_000 and pool.free_buffers == 0
    assert pool.unallocated_memory == 65536 - KB16 - 40_000


def test_a_big_request_gathers_memory_piece_by_piece_and_is_not_starved():
    pool = BufferPool(65536, KB16)
    held = [pool.allocate(KB16, 0) for _ in range(4)]
    results: list = []
    thread = blocked_allocation(pool, 40_960, results)
    small: list = []
    pool.deallocate(held.pop())
    wait_for(lambda: pool.free_buffers == 0)                       # the big waiter took those 16 KiB
    assert pool.available_memory == 0 and not results
    small_thread = blocked_allocation(pool, KB16, small)             # queues behind the big request
    pool.deallocate(held.pop())
    pool.deallocate(held.pop())
    thread.join(5)
    assert len(results[0]) == 40_960
    assert not small                                                 # 8 KiB are left: not enough for it
    pool.deallocate(results[0])
    small_thread.join(5)
    assert len(small[0]) == KB16


def test_a_timed_out_waiter_gives_back_what_it_gathered():
    pool = BufferPool(65536, KB16)
    held = [pool.allocate(KB16, 0) for _ in range(4)]
    results: list = []
    thread = blocked_allocation(pool, 40_960, results, max_block_ms=300)
    pool.deallocate(held.pop())                                      # it gathers 16 KiB, then times out
    thread.join(5)
    assert isinstance(results[0], TimeoutError)
    assert pool.unallocated_memory == KB16 and pool.queued() == 0


def test_invalid_pool_sizes():
    with pytest.raises(ValueError):
        BufferPool(1000, 2000)
    with pytest.raises(ValueError):
        BufferPool(1000, -1)
