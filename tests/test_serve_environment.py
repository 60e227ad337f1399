"""``panelist gateway/serve --database URL`` hands the URL down to what it starts; it never
writes it into the process environment, where every later child and library would read it."""

import os

from panelist.metrics.offload import main


def test_serving_with_a_database_leaves_the_environment_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PANELIST_DATABASE_URL", raising=False)
    # nothing listens on port 9: the gateway is refused, after the data folder was opened
    code = main(["gateway", "--data", str(tmp_path), "--port", "0",
                 "--database", "postgresql://someone@127.0.0.1:9/panelist"])
    assert code != 0
    assert "panelist: error:" in capsys.readouterr().err
    assert "PANELIST_DATABASE_URL" not in os.environ
