"""A database password never shows: not in what ``redact`` makes of any form a database may be
named in, not on a command line (refused before anything starts, since ``ps`` shows
arguments), not in the refusal of a URL that is not PostgreSQL's."""

import pytest

from panelist.metrics.cli.main import main
from panelist.metrics.store.pg import has_secret, redact

SECRET = "s3cret-w0rd"

FORMS = [
    (
        f"postgresql://ann:{SECRET}@db.internal:5433/panels",
        "postgresql://ann:***@db.internal:5433/panels",
    ),
    (
        f"postgres://ann@db.internal/panels?password={SECRET}&sslmode=require",
        "postgres://ann@db.internal/panels?password=***&sslmode=require",
    ),
    (
        f"postgresql://db.internal/panels?PASSWORD={SECRET}",
        "postgresql://db.internal/panels?PASSWORD=***",
    ),
    (
        f"postgresql://ann@db.internal/panels?sslpassword={SECRET}",
        "postgresql://ann@db.internal/panels?sslpassword=***",
    ),
    (
        f"host=db.internal user=ann password={SECRET} dbname=panels",
        "host=db.internal user=ann password=*** dbname=panels",
    ),
    (
        f"host=db.internal password = '{SECRET} with space' port=5433",
        "host=db.internal password=*** port=5433",
    ),
    (f"host=db.internal password=a://{SECRET}", "host=db.internal password=***"),
]


@pytest.mark.parametrize("url, shown", FORMS)
def test_redact_hides_the_password_in_every_form(url, shown):
    assert redact(url) == shown
    assert SECRET not in redact(url)
    assert has_secret(url)


def test_a_url_without_a_password_is_shown_as_it_is():
    url = "postgresql://ann@db.internal:5433/panels?sslmode=require"
    assert redact(url) == url and not has_secret(url)


def test_a_malformed_url_is_not_shown_at_all():
    assert redact(f"postgresql://ann:{SECRET}@[::1/x") == "(a malformed database URL)"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.mark.parametrize("url", [u for u, _ in FORMS if u.startswith("postgres")])
def test_db_refuses_a_password_on_its_command_line(capsys, url):
    code, out, err = run(capsys, "db", "init", "--database", url)
    assert code == 1
    assert "process list" in err and "PGPASSWORD" in err and "PANELIST_DATABASE_URL" in err
    assert SECRET not in out + err


def test_a_server_refuses_a_password_on_its_command_line(capsys, tmp_path):
    from panelist.gateway import make_gateway
    from panelist.metrics.cli.main import Runtime

    code = main(
        [
            "gateway",
            "--data",
            str(tmp_path),
            "--port",
            "0",
            "--database",
            f"postgresql://ann:{SECRET}@127.0.0.1:1/panels",
        ],
        Runtime(make_gateway=make_gateway),
    )
    out, err = capsys.readouterr()
    assert code == 1 and "process list" in err
    assert SECRET not in out + err


def test_a_keyword_string_is_refused_without_its_password(capsys):
    code, out, err = run(capsys, "db", "init", "--database", f"host=db.internal password={SECRET}")
    assert code == 1 and "not a PostgreSQL URL" in err and "password=***" in err
    assert SECRET not in out + err
