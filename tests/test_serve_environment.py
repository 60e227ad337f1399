"""``panelist gateway/serve --database URL`` hands the URL down to what it starts; it never
writes it into the process environment, where every later child and library would read it."""

import os
import socket

import pytest

from panelist.metrics.offload import main


@pytest.mark.slow
def test_serving_with_a_database_leaves_the_environment_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PANELIST_DATABASE_URL", raising=False)
    # an instance starts without its database (nothing listens on port 9), so what stops this
    # one, after the data folder was opened, is a port another socket already listens on
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code = main(
            [
                "gateway",
                "--data",
                str(tmp_path),
                "--port",
                str(taken.getsockname()[1]),
                "--database",
                "postgresql://someone@127.0.0.1:9/panelist",
            ]
        )
    assert code != 0
    assert "panelist: error:" in capsys.readouterr().err
    assert "PANELIST_DATABASE_URL" not in os.environ
