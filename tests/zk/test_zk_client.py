"""ZkClient behaviour, identical on the embedded backend and on a real ZooKeeper through kazoo."""
from __future__ import annotations

import os
import threading
import time

import pytest
from external import four_letter
from kazoo.client import KazooClient

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.kazoo_backend import KazooZkClient
from kafka_edu.server.zk.zk_client import (
    MAX_DATA_BYTES, BadArgumentsError, BadVersionError, ClientClosedError, DataTooLargeError, EventType,
    NoChildrenForEphemeralsError, NodeExistsError, NoNodeError, NotEmptyError, SessionState, WatchedEvent, ZkError)

from _zktest_util import expire, wait_for


def test_create_get_set_delete_with_versions(zk_cluster):
    zk = zk_cluster.client()
    assert zk.create("/a", b"one") == "/a"
    data, stat = zk.get("/a")
    assert (data, stat.version, stat.ephemeral, stat.data_length, stat.num_children) == (b"one", 0, False, 3, 0)
    assert zk.set("/a", "two", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set("/a", b"three", version=0)
    assert zk.get("/a")[0] == b"two"
    assert zk.set("/a", b"three").version == 2        # version -1: unconditional
    with pytest.raises(BadVersionError):
        zk.delete("/a", version=1)
    zk.delete("/a", version=2)
    assert zk.exists("/a") is None
    with pytest.raises(NoNodeError):
        zk.get("/a")
    with pytest.raises(NoNodeError):
        zk.set("/a", b"")
    with pytest.raises(NoNodeError):
        zk.delete("/a")


def test_create_errors_parents_and_recursive_delete(zk_cluster):
    zk = zk_cluster.client()
    with pytest.raises(NoNodeError):
        zk.create("/p/q", b"")
    assert zk.create("/p/q/r", b"x", makepath=True) == "/p/q/r"
    assert zk.get("/p/q")[0] == b""
    assert zk.get_children("/p") == ["q"]
    with pytest.raises(NodeExistsError):
        zk.create("/p/q/r", b"y")
    with pytest.raises(NotEmptyError):
        zk.delete("/p")
    for name in ("b", "c", "a"):
        zk.create(f"/p/{name}")
    assert zk.get_children("/p") == ["a", "b", "c", "q"]
    assert zk.exists("/p").num_children == 4
    with pytest.raises(BadArgumentsError):
        zk.delete("/p", version=0, recursive=True)
    zk.delete("/p", recursive=True)
    assert zk.exists("/p") is None
    with pytest.raises(NoNodeError):
        zk.delete("/p", recursive=True)
    zk.ensure_path("/x/y/z")
    zk.ensure_path("/x/y/z")
    assert zk.exists("/x/y/z") is not None


@pytest.mark.parametrize("path", ["relative", "/trailing/", "/double//slash", "/dot/./x", "/dot/../x"])
def test_bad_paths_are_rejected(zk_cluster, path):
    zk = zk_cluster.client()
    with pytest.raises(BadArgumentsError):
        zk.create(path, b"")
    with pytest.raises(BadArgumentsError):
        zk.get(path)


def test_data_must_be_bytes_or_str(zk_cluster):
    zk = zk_cluster.client()
    with pytest.raises(BadArgumentsError):
        zk.create("/n", 42)


def test_data_over_jute_maxbuffer_is_refused_before_it_is_sent(zk_cluster):
    """A real server drops the connection of a request over jute.maxbuffer; the client refuses the
    datum instead, and the session goes on. A datum of exactly the limit is stored."""
    zk = zk_cluster.client()
    session = zk.session_id
    with pytest.raises(DataTooLargeError, match="jute.maxbuffer"):
        zk.create("/big", b"x" * (MAX_DATA_BYTES + 1))
    zk.create("/big", b"")
    with pytest.raises(DataTooLargeError):
        zk.set("/big", "y" * (MAX_DATA_BYTES + 1))
    zk.set("/big", b"z" * MAX_DATA_BYTES)
    assert len(zk.get("/big")[0]) == MAX_DATA_BYTES and zk.session_id == session


def test_ephemeral_is_owned_by_its_session_and_goes_on_close(zk_cluster):
    owner, observer = zk_cluster.client(), zk_cluster.client()
    owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    stat = observer.exists("/brokers/ids/1")
    assert stat.ephemeral and stat.ephemeral_owner == owner.session_id
    assert observer.exists("/brokers/ids").ephemeral_owner == 0
    with pytest.raises(NoChildrenForEphemeralsError):
        owner.create("/brokers/ids/1/child", b"")
    owner.close()
    assert observer.get_children("/brokers/ids") == []
    with pytest.raises(ClientClosedError):
        owner.get("/brokers/ids")


def test_a_crashed_client_keeps_its_session_until_the_timeout_then_its_ephemerals_go():
    """Beyond 0.10 (fault injection, embedded backend): a crash sends nothing, and the server ends the
    session only when its timeout has passed; on a MockTime tree the timeout still runs on the wall clock."""
    server = EmbeddedZooKeeper(MockTime())
    owner, observer = server.connect("owner", session_timeout_ms=3000), server.connect("observer")
    states, events = [], []
    owner.add_state_listener(states.append)
    owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    observer.get_children("/brokers/ids", watch=events.append)
    crashed_at = time.monotonic()
    owner.crash()
    assert observer.get_children("/brokers/ids") == ["1"] and owner.session_id in server.session_ids
    with pytest.raises(ClientClosedError):
        owner.get("/")
    wait_for(lambda: observer.get_children("/brokers/ids") == [], "the crashed session's end")
    assert time.monotonic() - crashed_at >= 2.9
    observer.await_events()
    assert events == [WatchedEvent(EventType.CHILD, "/brokers/ids")]
    assert owner.session_id not in server.session_ids
    assert SessionState.LOST not in states                  # nothing ran on the crashed client's side
    owner.crash()
    owner.close()                                           # both do nothing on a dead client
    observer.close()


def test_expiring_a_crashed_clients_session_opens_no_new_one():
    server = EmbeddedZooKeeper()
    owner = server.connect("owner", session_timeout_ms=60_000)
    owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    before = set(server.session_ids)
    owner.crash()
    server.expire_session(owner.session_id)               # a dead client does not come back
    assert set(server.session_ids) == before - {owner.session_id}
    assert server.connect("observer").get_children("/brokers/ids") == []


def test_ephemeral_goes_on_real_session_expiry_and_the_client_gets_a_new_session(zk_cluster):
    owner, observer = zk_cluster.client(), zk_cluster.client()
    states = []
    owner.add_state_listener(states.append)
    owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    old_session = owner.session_id
    expire(owner, states)
    assert observer.get_children("/brokers/ids") == []
    assert owner.session_id != old_session
    assert states.index(SessionState.EXPIRED) < len(states) - 1    # CONNECTED came after EXPIRED
    owner.create("/brokers/ids/1", b"{}", ephemeral=True)          # re-register on the new session
    assert observer.exists("/brokers/ids/1").ephemeral_owner == owner.session_id


def test_sequential_names_count_child_changes_of_the_parent(zk_cluster):
    zk = zk_cluster.client()
    names = [zk.create("/q/item-", b"", sequential=True, makepath=True) for _ in range(3)]
    assert names == ["/q/item-0000000000", "/q/item-0000000001", "/q/item-0000000002"]
    zk.create("/q/plain", b"")
    assert zk.create("/q/item-", b"", sequential=True) == "/q/item-0000000004"
    zk.delete("/q/plain")
    assert zk.create("/q/", b"x", sequential=True) == "/q/0000000005"   # deletions do not count
    assert zk.exists("/q").cversion == 7


def test_data_watch_fires_exactly_once(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    zk.create("/w", b"0")
    events = []
    zk.get("/w", watch=events.append)
    writer.set("/w", b"1")
    writer.set("/w", b"2")                 # the watch is spent
    zk.await_events()
    assert events == [WatchedEvent(EventType.CHANGED, "/w")]
    zk.get("/w", watch=events.append)     # re-arm
    writer.delete("/w")
    zk.await_events()
    assert events[1:] == [WatchedEvent(EventType.DELETED, "/w")]


def test_exists_watch_fires_on_creation_and_get_on_missing_leaves_none(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    events = []
    with pytest.raises(NoNodeError):
        zk.get("/later", watch=events.append)
    assert zk.exists("/later", watch=events.append) is None
    writer.create("/later", b"")
    writer.set("/later", b"x")
    zk.await_events()
    assert events == [WatchedEvent(EventType.CREATED, "/later")]


def test_child_watch_fires_exactly_once(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    zk.create("/kids", b"")
    events = []
    assert zk.get_children("/kids", watch=events.append) == []
    writer.create("/kids/a", b"")
    writer.create("/kids/b", b"")
    writer.set("/kids", b"data changes do not fire child watches")
    zk.await_events()
    assert events == [WatchedEvent(EventType.CHILD, "/kids")]
    assert zk.get_children("/kids", watch=events.append) == ["a", "b"]
    writer.delete("/kids/a")
    zk.await_events()
    assert events[1:] == [WatchedEvent(EventType.CHILD, "/kids")]
    zk.get_children("/kids", watch=events.append)
    writer.delete("/kids", recursive=True)
    zk.await_events()
    assert events[2:] == [WatchedEvent(EventType.CHILD, "/kids")]   # its child went first


def test_callbacks_run_on_the_event_thread_and_may_call_back_into_the_client(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    zk.create("/cb", b"0")
    seen = []

    def on_change(event):
        data, stat = zk.get(event.path, watch=on_change)      # read and re-arm from the callback
        seen.append((threading.current_thread() is not threading.main_thread(), data, stat.version))

    zk.get("/cb", watch=on_change)
    for n in (1, 2, 3):
        writer.set("/cb", str(n))
        zk.await_events()
    assert seen == [(True, b"1", 1), (True, b"2", 2), (True, b"3", 3)]


def test_data_subscription_reports_every_change_once(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    calls = []
    zk.subscribe_data_changes("/controller", lambda path, data: calls.append((path, data)))
    steps = [lambda: writer.create("/controller", b"1", ephemeral=True),
             lambda: writer.set("/controller", b"2"),
             lambda: writer.delete("/controller"),
             lambda: writer.create("/controller", b"3")]
    for step in steps:
        step()
        zk.await_events()
    assert calls == [("/controller", b"1"), ("/controller", b"2"), ("/controller", None), ("/controller", b"3")]


def test_child_subscription_reports_every_change_once_and_stops_when_cancelled(zk_cluster):
    zk, broker = zk_cluster.client(), zk_cluster.client()
    zk.create("/brokers/ids", b"", makepath=True)
    calls = []
    sub = zk.subscribe_child_changes("/brokers/ids", lambda path, children: calls.append(children))
    broker.create("/brokers/ids/2", b"", ephemeral=True)
    zk.await_events()
    broker.create("/brokers/ids/1", b"", ephemeral=True)
    zk.await_events()
    broker.close()
    zk.await_events()
    assert calls == [["2"], ["1", "2"], []]
    sub.cancel()
    zk.create("/brokers/ids/9", b"")
    zk.await_events()
    assert calls == [["2"], ["1", "2"], []]


def test_child_subscription_on_a_missing_parent_sees_it_created_and_deleted(zk_cluster):
    zk = zk_cluster.client()
    calls = []
    zk.subscribe_child_changes("/admin/delete_topics", lambda path, children: calls.append(children))
    zk.create("/admin/delete_topics", b"", makepath=True)
    zk.await_events()
    zk.create("/admin/delete_topics/t", b"")
    zk.await_events()
    zk.delete("/admin/delete_topics", recursive=True)
    zk.await_events()
    assert calls[0] == [] and calls[1] == ["t"] and calls[-1] is None


def test_subscriptions_re_arm_after_session_expiry(zk_cluster):
    zk, writer = zk_cluster.client(), zk_cluster.client()
    writer.create("/brokers/ids", b"", makepath=True)
    calls, states = [], []
    zk.add_state_listener(states.append)
    zk.subscribe_child_changes("/brokers/ids", lambda path, children: calls.append(children))
    expire(zk, states)
    zk.await_events()
    assert calls == [[]]                       # fired once with the current state on the new session
    writer.create("/brokers/ids/7", b"")
    zk.await_events()
    assert calls == [[], ["7"]]                # and keeps working


def test_close_delivers_lost_and_refuses_requests(zk_cluster):
    zk = zk_cluster.client()
    states = []
    zk.add_state_listener(states.append)
    zk.close()
    wait_for(lambda: states and states[-1] is SessionState.LOST, "LOST after close")
    assert states.count(SessionState.LOST) == 1
    for call in (lambda: zk.get("/"), lambda: zk.create("/x"), lambda: zk.await_events()):
        with pytest.raises(ClientClosedError):
            call()
    zk.close()    # idempotent


def test_concurrent_compare_and_set_loses_no_update(zk_cluster):
    """Several threads and sessions increment one counter with version-checked writes: every
    BadVersion is a lost race that retries, so the final value counts every increment."""
    clients = [zk_cluster.client() for _ in range(3)]
    clients[0].create("/counter", b"0")
    threads_per_client, increments = 2, 15

    def work(zk):
        for _ in range(increments):
            while True:
                data, stat = zk.get("/counter")
                try:
                    zk.set("/counter", str(int(data) + 1), version=stat.version)
                    break
                except BadVersionError:
                    continue

    threads = [threading.Thread(target=work, args=(zk,)) for zk in clients for _ in range(threads_per_client)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    total = len(threads) * increments
    data, stat = clients[0].get("/counter")
    assert int(data) == total and stat.version == total


def test_a_chroot_that_cannot_be_created_leaves_no_session_or_thread(zookeeper):
    """A broker pointed at 'host:port/eph/kafka', where /eph is ephemeral, fails to start: the kazoo
    session it opened, and the threads around it, must not outlive the failure."""
    holder = KazooClient(hosts=zookeeper.connect)
    holder.start(10)
    holder.create(f"/eph-{os.getpid()}", b"", ephemeral=True)
    try:
        threads = set(threading.enumerate())
        sessions = alive_connections(zookeeper)
        with pytest.raises(ZkError):
            KazooZkClient(f"{zookeeper.connect}/eph-{os.getpid()}/kafka", connection_timeout_ms=10_000)
        wait_for(lambda: alive_connections(zookeeper) == sessions and
                 not [t for t in set(threading.enumerate()) - threads if t.is_alive()],
                 "the failed client's session and threads to go", timeout_s=10)
    finally:
        holder.stop()
        holder.close()


def alive_connections(zookeeper) -> int:
    stats = four_letter(zookeeper.port, b"mntr", 65536).decode()
    return int(next(line.split()[1] for line in stats.splitlines() if line.startswith("zk_num_alive_connections")))

