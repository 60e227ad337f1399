"""``config/providers.json`` is validated with errors that name the provider and the field; the
shipped file is valid; PKCE's challenge is RFC 7636's; a stored key is read by the endpoint
only when its variable is unset and only when that variable may be read."""

import json
import os
from pathlib import Path

import pytest
from panelist.metrics.errors import ConfigInvalid, KeyRefused, NotFound
from panelist.metrics.home import DEFAULTS, open_home
from panelist.metrics.roster.keystore import KeyStore
from panelist.metrics.roster.roster import Endpoint, Roster
from panelist.metrics.signin import pkce
from panelist.metrics.signin.providers import Providers, parse

GOOD = {
    "auth_url": "https://p.example/auth",
    "exchange_url": "https://p.example/keys",
    "base_url": "https://p.example/v1",
    "fields": {
        "callback": "callback_url",
        "challenge": "code_challenge",
        "method": "code_challenge_method",
        "code": "code",
        "verifier": "code_verifier",
        "key": "key",
    },
}


def with_(**over):
    entry = json.loads(json.dumps(GOOD))
    for k, v in over.items():
        if k.startswith("f_"):
            entry["fields"][k[2:]] = v
        elif v is None:
            entry.pop(k)
        else:
            entry[k] = v
    return {"v": 1, "providers": {"p": entry}}


def test_the_shipped_providers_file_is_valid_and_names_openrouter():
    known = parse(json.loads((DEFAULTS / "providers.json").read_text()))
    p = known["openrouter"]
    assert p.auth_url.startswith("https://") and p.exchange_url.startswith("https://")
    assert p.fields["callback"] == "callback_url" and p.fields["state"] is None


@pytest.mark.parametrize(
    "over, says",
    [
        ({"auth_url": None}, "provider 'p': \"auth_url\" is missing"),
        ({"exchange_url": "http://p.example/keys"}, '"exchange_url" must be https://'),
        ({"auth_url": "ftp://p.example"}, '"auth_url" must be an https:// URL'),
        ({"exchange_body": "xml"}, '"exchange_body" must be "json" or "form"'),
        ({"f_key": None}, '"fields.key" must name the provider\'s parameter'),
        ({"f_code": "a b"}, '"fields.code" must name the provider\'s parameter'),
        ({"f_colour": "x"}, "unknown field 'colour'"),
        ({"params": {"code_challenge": "x"}}, "must not set 'code_challenge'"),
        ({"params": ["x"]}, '"params" must map parameter names to strings'),
        ({"fields": "callback_url"}, '"fields" must be an object'),
    ],
)
def test_a_wrong_entry_is_refused_naming_the_provider_and_the_field(over, says):
    with pytest.raises(ConfigInvalid) as err:
        parse(with_(**over))
    assert says in err.value.message


def test_an_unknown_provider_lists_the_known_ones(tmp_path):
    with pytest.raises(NotFound) as err:
        Providers(open_home(tmp_path)).get("nope")
    assert "no sign-in provider 'nope'" in err.value.message and "openrouter" in err.value.message


def test_the_challenge_is_rfc_7636s_s256():
    # RFC 7636, appendix B
    assert (
        pkce.challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
    v = pkce.new_verifier()
    assert 43 <= len(v) <= 128 and set(v) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    )
    assert v != pkce.new_verifier() and pkce.new_state() != pkce.new_state()


def test_a_stored_key_is_read_when_the_variable_is_unset_and_the_environment_wins(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("PANELIST_KEY_OR", raising=False)
    roster = Roster(open_home(tmp_path))
    ep = Endpoint("or", "https://p.example/v1", "PANELIST_KEY_OR")
    assert roster.api_key(ep) is None
    KeyStore().put("PANELIST_KEY_OR", "sk-stored")
    assert roster.api_key(ep) == "sk-stored"
    monkeypatch.setenv("PANELIST_KEY_OR", "sk-shell")
    assert roster.api_key(ep) == "sk-shell"


def test_a_stored_key_under_a_variable_endpoints_may_not_read_is_refused(tmp_path):
    KeyStore().put("OTHER_SECRET", "sk-stored")
    roster = Roster(open_home(tmp_path))
    with pytest.raises(KeyRefused) as err:
        roster.api_key(Endpoint("or", "https://p.example/v1", "OTHER_SECRET"))
    assert "sk-stored" not in err.value.message


def test_the_key_file_lives_outside_the_data_folder_and_a_broken_one_never_shows_its_text(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("PANELIST_KEY_FILE")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert KeyStore().path == tmp_path / "cfg" / "panelist" / "endpoint-keys.json"
    path = Path(os.environ.get("XDG_CONFIG_HOME")) / "panelist" / "endpoint-keys.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"keys": {"PANELIST_KEY_OR": "sk-half')
    with pytest.raises(ConfigInvalid) as err:
        KeyStore().get("PANELIST_KEY_OR")
    assert "sk-half" not in err.value.message and str(path) in err.value.message


def test_a_key_file_inside_the_data_folder_is_refused_before_anything_listens(
    tmp_path, monkeypatch
):
    from panelist.metrics.signin.flow import SignIn

    home = open_home(tmp_path / "data")
    monkeypatch.setenv("PANELIST_KEY_FILE", str(home.config / "keys.secret.json"))
    with pytest.raises(ConfigInvalid) as err:
        SignIn(home, "or", "openrouter")
    assert "inside the data folder" in err.value.message
    assert "PANELIST_KEY_FILE" in err.value.message


def test_a_key_stored_by_another_process_counts_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv("PANELIST_KEY_OR", raising=False)
    reader = KeyStore()
    assert reader.get("PANELIST_KEY_OR") is None
    KeyStore().put("PANELIST_KEY_OR", "sk-one")
    assert reader.get("PANELIST_KEY_OR") == "sk-one"
    KeyStore().put("PANELIST_KEY_OR", "sk-two-longer")
    assert reader.get("PANELIST_KEY_OR") == "sk-two-longer"
