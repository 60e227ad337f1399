"""The dashboard's sessions kept in a file that several processes share (one ``Sessions`` per
worker on the same file): a login through one holds on the other, a logout or an end through
one is seen by the other, the table stays bounded, and nothing of a session id is stored."""

import os

from panelist.metrics.server.session import MAX_SESSIONS, Sessions

TOKEN = "shared-admin-token-0123456789"


def pair(tmp_path):
    path = str(tmp_path / "sessions")
    return Sessions(TOKEN, shared=path), Sessions(TOKEN, shared=path), path


def test_a_login_through_one_holds_on_the_other_until_a_logout_through_either(tmp_path):
    a, b, path = pair(tmp_path)
    sid = a.login(TOKEN, "127.0.0.1")
    assert b.valid(sid) and a.valid(sid)
    other = b.login(TOKEN, "127.0.0.1")
    assert a.valid(other)
    b.logout(sid)
    assert not a.valid(sid) and not b.valid(sid)
    assert a.valid(other)  # the other session is untouched
    raw = open(path, "rb").read()
    assert sid.encode() not in raw and other.encode() not in raw  # digests only
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_a_session_that_ended_is_refused_and_forgotten_by_every_process(tmp_path):
    a, b, path = pair(tmp_path)
    sid = a.login(TOKEN, "127.0.0.1", now=1000.0)
    assert b.valid(sid, now=1000.0 + a.lifetime - 1)
    size = os.path.getsize(path)
    assert not b.valid(sid, now=1000.0 + a.lifetime)
    assert os.path.getsize(path) < size  # dropped from the file, not only refused
    assert not a.valid(sid, now=1000.0)


def test_the_shared_table_keeps_the_newest_sessions_up_to_its_bound(tmp_path):
    a, b, _ = pair(tmp_path)
    first = a.login(TOKEN, "127.0.0.1")
    for _ in range(MAX_SESSIONS):
        b.login(TOKEN, "127.0.0.1")
    assert not a.valid(first)  # the oldest went first
    newest = a.login(TOKEN, "127.0.0.1")
    assert b.valid(newest)
