"""A throwaway PostgreSQL cluster for the tests: ``initdb`` in a temporary folder, a free
loopback port, trust auth, stopped and removed when the session ends.

The server refuses to run as root, so as root every binary runs through ``runuser -u postgres``
in a folder that user owns; as any other user they run directly. Without the distribution's
binaries the tests that need a cluster skip, unless ``PANELIST_REQUIRE_POSTGRES=1`` (CI), where
their absence is a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

START_PATIENCE = 60.0  # seconds for initdb + start on a loaded machine


def binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb`` in it, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One running cluster; ``url(db)`` names a database in it."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="panelist-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        if self.root:
            shutil.chown(self.dir, "postgres", "postgres")
            self.dir.chmod(0o700)

    def _cmd(self, *args) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if self.root else []) + list(args)

    def init(self) -> None:
        subprocess.run(
            self._cmd(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.dir,  # initdb reads its working directory: the worker's may be gone
        )

    def start(self) -> None:
        """Start the server (again, after ``stop``) on the same port and wait until it answers."""
        log = open(self.dir / "server.log", "ab")
        try:
            self.proc = subprocess.Popen(
                self._cmd(
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.dir),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ),
                stdout=log,
                stderr=log,
                cwd=self.dir,
            )
        finally:
            log.close()
        end = time.monotonic() + START_PATIENCE
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    "postgres exited at start:\n" + (self.dir / "server.log").read_text()[-2000:]
                )
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
            )
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("postgres did not answer within %.0f s" % START_PATIENCE)

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster, by the PID in ``postmaster.pid``: open
        sessions are cut), waited for until the server and its ``runuser`` are gone."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        try:
            proc.wait(START_PATIENCE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        end = time.monotonic() + START_PATIENCE
        while pid is not None and time.monotonic() < end:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)

    def processes(self) -> list[int]:
        """The postmaster's PID and its children's (every backend and helper process)."""
        try:
            top = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        found = [top]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rpartition(")")[2].split()
                except OSError:
                    continue
                if fields and int(fields[1]) == top:
                    found.append(int(entry.name))
        return found

    def freeze(self) -> None:
        """Stop every process of the server (SIGSTOP): connections stay open, nothing answers."""
        for pid in self.processes():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.processes():
            os.kill(pid, signal.SIGCONT)
        if self.proc is not None:
            # runuser stops itself when the server it started stops (as su does, for job
            # control), and would sit stopped until the next shutdown waits it out
            os.kill(self.proc.pid, signal.SIGCONT)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self) -> str:
        """A fresh, empty database's URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_cluster() -> Cluster:
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError("no /usr/lib/postgresql/*/bin/initdb: apt-get install postgresql")
    cluster = Cluster(bin_dir)
    try:
        cluster.init()
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    return cluster
