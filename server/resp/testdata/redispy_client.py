"""What redis-py's users do beyond GET and SET, against a live server.

Connects by URL with the default user and a password (the form LMCache's
docs give), reads CLIENT INFO and CLIENT LIST into dicts, runs pipelines
with and without a transaction (redis-py's pipeline() sends MULTI/EXEC),
checks that a transaction with a bad command runs nothing, and resets the
connection. Prints "ok" and what it checked.
Usage: redispy_client.py HOST PORT
"""

import sys

import redis

HOST, PORT = sys.argv[1], int(sys.argv[2])


def main():
    # The server has no passwords: the default user takes any.
    r = redis.Redis.from_url(f"redis://default:anything@{HOST}:{PORT}/0")
    assert r.ping()
    r.client_setname("py-test")
    info = r.client_info()
    for field in ("id", "addr", "laddr", "name", "age", "idle", "flags", "db", "cmd", "user", "resp"):
        assert field in info, (field, info)
    assert info["name"] == "py-test", info
    other = redis.Redis(host=HOST, port=PORT)
    other.ping()
    clients = r.client_list()
    assert {c["name"] for c in clients} >= {"py-test"}, clients
    assert len(clients) >= 2, clients
    try:
        redis.Redis.from_url(f"redis://bob:anything@{HOST}:{PORT}/0").ping()
        raise AssertionError("an unknown user logged in")
    except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
        assert "WRONGPASS" in str(e), e

    # A transactional pipeline: MULTI ... EXEC, the replies in order.
    with r.pipeline() as p:
        p.set("tx:a", b"1")
        p.set("tx:b", b"\r\n\x00binary", ex=100)
        p.get("tx:a")
        p.exists("tx:a", "tx:b", "tx:missing")
        p.delete("tx:a")
        got = p.execute()
    assert got == [True, True, b"1", 2, 1], got
    assert r.get("tx:b") == b"\r\n\x00binary"
    assert 0 < r.ttl("tx:b") <= 100

    # A command the server refuses while queueing: the transaction is
    # discarded and none of it runs.
    with r.pipeline() as p:
        p.set("tx:c", b"never")
        p.execute_command("NO-SUCH-COMMAND")
        try:
            p.execute()
            raise AssertionError("EXEC ran a transaction with a bad command")
        except redis.exceptions.ResponseError:
            pass
    assert r.exists("tx:c") == 0

    # Optimistic locking: redis-py's transaction() WATCHes, reads, then
    # runs MULTI/EXEC, retrying when the key changed under it.
    r.set("tx:counter", 5)
    calls = []

    def double(pipe):
        calls.append(1)
        v = int(pipe.get("tx:counter"))
        if len(calls) == 1:
            other.set("tx:counter", 7)  # another client writes: EXEC fails, retried
        pipe.multi()
        pipe.set("tx:counter", v * 2)

    r.transaction(double, "tx:counter")
    assert len(calls) == 2 and r.get("tx:counter") == b"14", (calls, r.get("tx:counter"))
    r.delete("tx:counter")

    # Without a transaction: a plain pipeline, one reply per command.
    with r.pipeline(transaction=False) as p:
        for i in range(100):
            p.set(f"pl:{i}", i)
        p.mget([f"pl:{i}" for i in range(100)])
        got = p.execute()
    assert got[:100] == [True] * 100 and got[100] == [str(i).encode() for i in range(100)], got[100][:3]
    r.delete(*[f"pl:{i}" for i in range(100)], "tx:b")

    assert r.execute_command("RESET") in (b"RESET", "RESET")
    assert r.client_getname() is None
    print("ok url-auth client-info client-list pipeline-tx tx-abort watch-retry pipeline reset")


main()
