"""Alerts: appended whole, read newest first, safe with two writers."""

import threading

from conftest import read_jsonl
from panelist.metrics import alerts


def test_alerts_are_appended_and_read_newest_first(folder):
    book = alerts.Alerts(folder)
    book.raise_alert(
        "retired", "fast", "fast failed 3 times in a row (auth); retired", reason="auth"
    )
    book.raise_alert("restored", "fast", "fast answered a probe; restored")
    newest = alerts.Alerts(folder).recent()
    assert [a["kind"] for a in newest] == ["restored", "retired"]
    assert newest[1]["reason"] == "auth" and newest[1]["subject"] == "fast"
    assert alerts.Alerts(folder).recent(limit=1)[0]["kind"] == "restored"
    book.close()


def test_two_writers_never_interleave_and_a_long_file_is_read_from_its_end(folder):
    books = [alerts.Alerts(folder), alerts.Alerts(folder)]

    def write(book, n):
        for i in range(300):
            book.raise_alert("went_paid", f"m{n}-{i}", "x" * 900)

    threads = [threading.Thread(target=write, args=(b, n)) for n, b in enumerate(books)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(read_jsonl(folder.root / "runs" / "alerts.jsonl")) == 600
    recent = alerts.Alerts(folder).recent(limit=500)
    assert 200 < len(recent) <= 500 and all(a["kind"] == "went_paid" for a in recent)
    for book in books:
        book.close()


def test_no_alerts_yet_is_an_empty_list(folder):
    assert alerts.Alerts(folder).recent() == []
