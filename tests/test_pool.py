"""The connection threads' pool: jobs run on kept threads, never more than its size, in order of
arrival when all are busy; idle threads end; ``busy`` says when handed jobs wait to run."""

import threading

from conftest import wait_until
from panelist.metrics.server.front.pool import Pool


def pool_threads(name: str) -> list:
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith(f"{name}-") and not t.name.endswith("-starter")
    ]


def test_jobs_beyond_its_size_wait_their_turn_in_order(request):
    pools = []
    for size in (2, 1):
        pool = Pool(size, name=f"pool-order{size}")
        request.addfinalizer(pool.close)
        pool.start()
        pools.append(pool)
    gate, started, lock = threading.Event(), {2: [], 1: []}, threading.Lock()

    def job(size, i):
        with lock:
            started[size].append(i)
        gate.wait(30)

    for pool in pools:
        for i in range(6):
            pool.submit(job, pool.size, i)  # never waits, whatever the pool is doing
    assert wait_until(lambda: len(started[2]) == 2 and len(started[1]) == 1)
    assert sorted(started[2]) == [0, 1] and started[1] == [0]  # the rest wait
    assert [p.threads for p in pools] == [2, 1]
    gate.set()
    assert wait_until(lambda: len(started[2]) == 6 and len(started[1]) == 6)
    assert started[1] == [0, 1, 2, 3, 4, 5]  # in order of arrival
    # the same threads ran them all
    assert len(pool_threads("pool-order2")) == 2 and len(pool_threads("pool-order1")) == 1


def test_an_idle_thread_ends_and_a_failing_job_does_not_end_its_thread(request, capsys):
    pool = Pool(1, idle=0.2, name="pool-idle")
    request.addfinalizer(pool.close)
    pool.start()
    done = threading.Event()

    def fails():
        raise ValueError("the job's own fault")

    pool.submit(fails)
    pool.submit(done.set)  # the same thread goes on to the next job
    assert done.wait(30)
    assert wait_until(lambda: pool.threads == 0 and not pool_threads("pool-idle"))
    assert "the job's own fault" in capsys.readouterr().err
    again = threading.Event()
    pool.submit(again.set)  # a new thread once there is work again
    assert again.wait(30)


def test_busy_while_handed_jobs_wait_to_run_and_told_when_no_longer(request):
    told = threading.Event()
    pool = Pool(1, name="pool-busy", busy_at=2, on_begun=told.set)
    request.addfinalizer(pool.close)
    pool.start()
    gate = threading.Event()
    pool.submit(gate.wait, 30)
    assert wait_until(lambda: len(pool_threads("pool-busy")) == 1 and not pool.busy)
    pool.submit(gate.wait, 30)
    assert not pool.busy  # one waits to run
    pool.submit(gate.wait, 30)
    assert pool.busy and not told.is_set()  # two do
    gate.set()  # the thread takes the next: one left waiting, below busy_at
    assert told.wait(30)
    assert wait_until(lambda: not pool.busy)


def test_after_close_idle_threads_end_and_no_job_is_taken(request):
    pool = Pool(3, name="pool-close")
    pool.start()
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(30)
    pool.close()
    assert wait_until(lambda: not pool_threads("pool-close") and pool.threads == 0)
    try:
        pool.submit(done.set)
    except RuntimeError as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("a closed pool took a job")
