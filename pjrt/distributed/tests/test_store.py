"""TcpStore: set/get across connections and threads, blocking get, timeout, try_get."""
import threading

import pytest

from pjrt.distributed.store import PrefixStore, TcpStore
from pjrt.errors import DeadlineExceededError, UnavailableError


@pytest.fixture
def store():
    server = TcpStore.serve()
    yield server
    server.close()


def test_set_then_get_from_another_client(store):
    store.set("a", b"\x00value\xff")
    client = TcpStore("127.0.0.1", store.port)
    assert client.get("a", timeout_s=1.0) == b"\x00value\xff"
    client.set("a", b"second")  # a later set replaces the value
    assert store.try_get("a") == b"second"


def test_get_blocks_until_another_thread_sets(store):
    got = []
    waiter = threading.Thread(target=lambda: got.append(store.get("late", timeout_s=30.0)))
    waiter.start()
    assert store.try_get("late") is None
    TcpStore("127.0.0.1", store.port).set("late", b"here")
    waiter.join(timeout=30.0)
    assert got == [b"here"]


def test_get_times_out_naming_the_key_and_the_store(store):
    with pytest.raises(DeadlineExceededError, match=rf"127.0.0.1:{store.port}.*'never'"):
        store.get("never", timeout_s=0.2)


def test_try_get_of_a_missing_key_is_none(store):
    assert store.try_get("missing") is None
    store.set("empty", b"")
    assert store.try_get("empty") == b""


def test_prefix_store_keeps_key_spaces_apart(store):
    one, two = PrefixStore(store, "one/"), PrefixStore(store, "two/")
    one.set("k", b"1")
    two.set("k", b"2")
    assert (one.get("k", 1.0), two.get("k", 1.0), store.try_get("one/k")) == (b"1", b"2", b"1")


def test_unreachable_store_names_its_address():
    server = TcpStore.serve()
    port = server.port
    server.close()
    with pytest.raises(UnavailableError, match=rf"127.0.0.1:{port}.*'k'"):
        TcpStore("127.0.0.1", port).set("k", b"v")
