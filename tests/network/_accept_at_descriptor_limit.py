"""Run alone in its own process by test_bad_input (no other thread may open a file meanwhile): a
connection waits in the backlog while the process has no descriptor left for accept. Prints JSON."""
import json
import logging
import os
import resource
import sys
import time

sys.path[:0] = [os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__))]

from network_harness import Broker  # noqa: E402


class Failures(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += "accepting a connection failed" in record.getMessage()


failures = Failures()
logging.getLogger("kafka_edu.server.network.acceptor").addHandler(failures)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
with Broker(**{"num.network.threads": 1}) as broker:
    first = broker.connect()
    assert first.request(1, b"a") == (1, b"a")
    listed = {int(fd) for fd in os.listdir("/proc/self/fd")}       # with the listing's own, closed again
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(fd for fd in range(soft) if fd not in listed), hard))
    try:
        waiting = broker.connect()              # the last descriptor: the broker cannot accept it
        time.sleep(1.5)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(json.dumps({"failures": failures.count, "answered": waiting.request(2, b"b") == (2, b"b"),
                      "threads_alive": broker.threads_alive()}))
