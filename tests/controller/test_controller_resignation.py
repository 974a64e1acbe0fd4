"""A controller that resigns while its auto-rebalance task waits for the controller lock: resignation
holds the lock and stops the task's scheduler, so the task must give up waiting once the controller
is no longer active (Kafka's KAFKA-4360 deadlock)."""
from __future__ import annotations

import sys
import threading

from _controller_cluster import Cluster
from external import wait_for


def _inside(thread: threading.Thread, function: str) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def test_resigning_while_the_rebalance_task_waits_for_the_lock(tmp_path):
    others = set(threading.enumerate())            # another module's broker 0 may run its own such task
    cluster = Cluster(tmp_path, size=1, **{"auto.leader.rebalance.enable": "true",
                                           "leader.imbalance.check.interval.seconds": 1})
    try:
        controller = cluster.controller().controller
        task = next(t for t in threading.enumerate()
                    if t.name == f"controller-{controller.broker_id}-rebalance-0" and t not in others)
        resigned = threading.Event()

        def busy_handler_then_resign():
            with controller.controller_lock:
                wait_for(lambda: _inside(task, "check_and_trigger_partition_rebalance"), timeout=10,
                         what="the rebalance task waiting for the controller lock")
                controller.shutdown()                     # resigns with the lock held, as a ZooKeeper handler does
            resigned.set()

        threading.Thread(target=busy_handler_then_resign, daemon=True, name="resigner").start()
        assert resigned.wait(15), "resignation deadlocked with the rebalance task"
    finally:
        cluster.shutdown()
