"""The roster: endpoints (where models are served) and models (what a seat can be).

Stored in ``config/roster.json`` as ``{"endpoints": {name: {...}}, "models": {alias: {...}}}``.
Every write is validated first and refused with a message that names the field and what to do;
a model always points at an endpoint that exists. API keys are never stored: an endpoint names
the environment variable holding its key, read at call time by ``Roster.api_key`` and only if
it is one an endpoint may read (``keyenv``: ``PANELIST_KEY_*`` or listed by hand, never the
admin token); unset means "call without a key" (local runtimes need none).

An endpoint or a model may carry call limits, ``max_concurrent`` and ``rpm`` (whole numbers of 1
or more; absent means no limit), which ``upstream.admission`` enforces across every process on
the data folder. They are stored in the endpoint's or model's own entry and survive a re-add of
it (``endpoint add`` / ``model add`` replace what they describe, not its limits). A hand-edited
value that is not a whole number of 1 or more is ignored on read, as if absent.

A model's family is what it is typed as; when none is typed, nothing is stored and the family is
the lineage its served id names (``family.stem``: ``gpt-4o-mini`` is ``gpt``), or the catalog's
family for it when the catalog knows one (``known.KnownRoster``). A model stored before families
were derived keeps the family it was stored with (its alias, then the default).

At most one model is the decider (``decider: true``, the model that labels the prompts of an
``auto`` collection): marking one clears the mark on every other in the same write. The mark is
stored and shown (``public``) only when set, so a roster without a decider reads as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from urllib.parse import urlsplit

from panelist.metrics.store import configfile
from panelist.metrics.errors import ConfigInvalid, NotFound
from panelist.metrics.home import Home
from panelist.metrics.plaintext import first_control
from panelist.metrics.roster.family import stem
from panelist.metrics.roster.keyenv import ENV_VAR, KeyEnvs, default_key_env

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")
ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,95}")
CURRENCY = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True)
class Endpoint:
    """Where models are served; its key is read through ``Roster.api_key``, never directly."""

    name: str
    base_url: str
    key_env: str


@dataclass(frozen=True)
class Model:
    alias: str
    endpoint: str
    served: str
    family: str
    grade: str = ""
    context: int | None = None
    max_output: int | None = None
    vision: bool = False
    tools: bool = False
    price_in: float | None = None
    price_out: float | None = None
    currency: str = "USD"
    retired: bool = False
    decider: bool = False
    # capabilities the catalog states it lacks (``tools``, ``structured_output``): never typed
    # nor stored here, only filled in by ``known.KnownRoster`` where nothing typed says yes
    lacks: frozenset[str] = frozenset()
    # False: no family was typed, ``family`` is the one its id names (``family.stem``) and the
    # catalog's may replace it; never stored
    family_typed: bool = True

    def public(self) -> dict:
        """The model's typed fields; ``decider`` only on the decider (see the module's
        docstring)."""
        # every public field is a plain scalar, so no deep copy (asdict's) is needed: at 500
        # models that copy was most of the time of GET /api/models
        out = {name: getattr(self, name) for name in _MODEL_PUBLIC}
        if not self.decider:
            del out["decider"]
        return out


_MODEL_PUBLIC = tuple(f.name for f in fields(Model) if f.name not in ("lacks", "family_typed"))

LIMIT_FIELDS = ("max_concurrent", "rpm")


@dataclass(frozen=True)
class CallLimits:
    """How many calls may run at once and start per minute; None: no limit of that kind."""

    max_concurrent: int | None = None
    rpm: int | None = None

    def __bool__(self) -> bool:
        return self.max_concurrent is not None or self.rpm is not None

    def public(self) -> dict:
        return {"max_concurrent": self.max_concurrent, "rpm": self.rpm}


NO_LIMITS = CallLimits()


def _read_limits(entry: dict) -> CallLimits:
    values = {}
    for name in LIMIT_FIELDS:
        v = entry.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            values[name] = v
    return CallLimits(**values)


@dataclass(frozen=True)
class RosterView:
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    models: dict[str, Model] = field(default_factory=dict)
    # only the endpoints and models that have a limit
    endpoint_limits: dict[str, CallLimits] = field(default_factory=dict)
    model_limits: dict[str, CallLimits] = field(default_factory=dict)


def _parse(doc: dict) -> RosterView:
    endpoints = {
        n: Endpoint(name=n, base_url=e["base_url"], key_env=e["key_env"])
        for n, e in (doc.get("endpoints") or {}).items()
    }
    endpoint_limits = {
        n: limits for n, e in (doc.get("endpoints") or {}).items() if (limits := _read_limits(e))
    }
    models, model_limits = {}, {}
    for alias, m in (doc.get("models") or {}).items():
        if m.get("endpoint") not in endpoints:
            continue  # a hand-edited file may point nowhere; such a model cannot be seated
        fields = {
            k: v
            for k, v in m.items()
            if k in Model.__dataclass_fields__ and k not in ("alias", "lacks", "family_typed")
        }
        if not fields.get("family"):  # none typed: the family its id names
            fields.update(family=stem(fields.get("served") or alias), family_typed=False)
        models[alias] = Model(alias=alias, **fields)
        if limits := _read_limits(m):
            model_limits[alias] = limits
    return RosterView(endpoints, models, endpoint_limits, model_limits)


def _keep_limits(old: dict | None, new: dict) -> dict:
    """``new`` with the limits ``old`` had: re-adding an endpoint or a model keeps its limits."""
    if old:
        new = dict(new, **{k: old[k] for k in LIMIT_FIELDS if k in old})
    return new


def check_limit(name: str, value) -> int | None:
    """A call limit as given: None (no limit) or a whole number of 1 or more."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigInvalid(
            f"{name} must be a whole number of 1 or more, got {value!r}; "
            "leave it out (or clear it) for no limit",
            param=name,
        )
    return value


def _versions(doc: dict) -> dict[str, dict[str, str]]:
    return {
        section: {
            name: configfile.version_of(value) for name, value in (doc.get(section) or {}).items()
        }
        for section in ("endpoints", "models")
    }


def check_endpoint(name: str, base_url: str, key_env: str | None) -> Endpoint:
    if not NAME.fullmatch(name or ""):
        raise ConfigInvalid(
            f"endpoint name '{name}' is not valid: use 1-48 lower-case letters, "
            "digits, '-' or '_', starting with a letter or digit"
        )
    parts = urlsplit(base_url or "")
    if first_control(base_url or "") or " " in (base_url or ""):
        raise ConfigInvalid(
            "base URL must not hold spaces or control characters; give it as "
            "http://127.0.0.1:11434/v1"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigInvalid(
            f"base URL '{base_url}' is not valid: give an http:// or https:// URL "
            "such as http://127.0.0.1:11434/v1"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigInvalid(
            "base URL must not carry a user:password, query or fragment; "
            "put the key in an environment variable (--key-env)"
        )
    key_env = key_env or default_key_env(name)
    if not isinstance(key_env, str) or not ENV_VAR.fullmatch(key_env):
        raise ConfigInvalid(
            f"key variable {key_env!r} is not a valid environment variable "
            "name; leave it out for the default, "
            f"{default_key_env(name)}",
            param="key_env",
        )
    return Endpoint(name, base_url.rstrip("/"), key_env)


def _positive_int(name: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigInvalid(f"{name} must be a whole number above 0, got {value!r}")
    return value


def _price(name: str, value) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or not math.isfinite(value)
    ):
        raise ConfigInvalid(
            f"{name} must be a price per million tokens of 0 or more, got {value!r}"
        )
    return float(value)


def check_model(
    view: RosterView,
    alias: str,
    endpoint: str,
    *,
    served: str | None = None,
    family: str | None = None,
    grade: str | None = None,
    context=None,
    max_output=None,
    vision: bool = False,
    tools: bool = False,
    price_in=None,
    price_out=None,
    currency: str | None = None,
    retired: bool = False,
    decider: bool = False,
) -> Model:
    if not ALIAS.fullmatch(alias or ""):
        raise ConfigInvalid(
            f"model alias '{alias}' is not valid: use up to 96 letters, digits "
            "or . _ : / -, starting with a letter or digit"
        )
    if alias.startswith("bench/"):
        raise ConfigInvalid(
            "a model alias must not start with 'bench/': that prefix names collections"
        )
    if endpoint not in view.endpoints:
        known = ", ".join(sorted(view.endpoints)) or "none yet"
        raise ConfigInvalid(
            f"unknown endpoint '{endpoint}' for model '{alias}'; add it with "
            f"`panelist endpoint add` first (known: {known})"
        )
    served = served or alias
    if not served.strip() or len(served) > 200:
        raise ConfigInvalid("served id must be 1-200 characters: the model id the endpoint knows")
    typed = bool(family)
    family = (family or stem(served)).lower()
    if not ALIAS.fullmatch(family):
        raise ConfigInvalid(f"family '{family}' is not valid: use letters, digits or . _ : / -")
    currency = (currency or "USD").upper()
    if not CURRENCY.fullmatch(currency):
        raise ConfigInvalid(f"currency '{currency}' is not valid: use a 3-letter code such as USD")
    for flag, value in (
        ("vision", vision),
        ("tools", tools),
        ("retired", retired),
        ("decider", decider),
    ):
        if not isinstance(value, bool):
            raise ConfigInvalid(f"{flag} must be true or false, got {value!r}")
    return Model(
        alias=alias,
        endpoint=endpoint,
        served=served,
        family=family,
        family_typed=typed,
        grade=(grade or "").strip(),
        context=_positive_int("context window", context),
        max_output=_positive_int("max output", max_output),
        vision=vision,
        tools=tools,
        price_in=_price("price in", price_in),
        price_out=_price("price out", price_out),
        currency=currency,
        retired=retired,
        decider=decider,
    )


def _only_decider(models: dict, alias: str) -> None:
    """Clear the decider mark of every model but ``alias`` (one decider at a time)."""
    for other, entry in models.items():
        if other != alias and entry.get("decider"):
            entry.pop("decider")


class Roster:
    """Reads and writes ``config/roster.json`` of one data folder."""

    def __init__(self, home: Home):
        self.path = home.file("roster.json")
        self.key_envs = KeyEnvs(home)
        self._cache = configfile.Cached(self.path, _parse)
        self._versions = configfile.Cached(self.path, _versions)

    def view(self) -> RosterView:
        return self._cache.get()

    def versions(self) -> dict[str, dict[str, str]]:
        """``{"endpoints": {name: version}, "models": {alias: version}}`` of what is stored,
        for edits that must not overwrite a change made meanwhile (``configfile.check_version``);
        worked out once per change of the file."""
        return self._versions.get()

    def check_endpoint(self, name: str, base_url: str, key_env: str | None) -> Endpoint:
        """An endpoint as given, validated as saving it would be, its key variable included."""
        ep = check_endpoint(name, base_url, key_env)
        self.key_envs.check(ep.key_env, ep.name)
        return ep

    def api_key(self, endpoint: Endpoint) -> str | None:
        """The one read of an endpoint's key (``keyenv.KeyEnvs.read``): None for no key;
        ``KeyRefused`` when its variable may not be read."""
        return self.key_envs.read(endpoint)

    def add_endpoint(
        self,
        name: str,
        base_url: str,
        key_env: str | None = None,
        *,
        by: str | None = None,
        expect: str | None = None,
    ) -> Endpoint:
        """Create or replace an endpoint. ``expect``: see ``configfile.check_version``."""
        ep = self.check_endpoint(name, base_url, key_env)
        new = {"base_url": ep.base_url, "key_env": ep.key_env}

        def change(doc):
            endpoints = doc.setdefault("endpoints", {})
            old = endpoints.get(name)
            configfile.check_version(f"endpoint {name}", old, expect)
            stored = _keep_limits(old, new)
            if old == stored:
                return None
            endpoints[name] = stored
            return f"endpoint {name}", old, stored

        configfile.update(self.path, change, by=by)
        return ep

    def remove_endpoint(self, name: str, *, by: str | None = None) -> None:
        def change(doc):
            endpoints = doc.setdefault("endpoints", {})
            if name not in endpoints:
                raise NotFound(f"unknown endpoint '{name}'; see `panelist endpoint list`")
            users = sorted(
                a for a, m in (doc.get("models") or {}).items() if m.get("endpoint") == name
            )
            if users:
                raise ConfigInvalid(
                    f"endpoint '{name}' still serves {', '.join(users)}; remove those models first"
                )
            return f"endpoint {name}", endpoints.pop(name), None

        configfile.update(self.path, change, by=by)

    def add_model(
        self,
        alias: str,
        endpoint: str,
        *,
        by: str | None = None,
        expect: str | None = None,
        **fields,
    ) -> Model:
        """Create or replace a model. ``expect``: see ``configfile.check_version``."""
        model = check_model(self.view(), alias, endpoint, **fields)
        new = {
            k: v
            for k, v in model.public().items()
            if k != "alias" and (k != "family" or model.family_typed)
        }  # a family none typed is derived

        def change(doc):
            if endpoint not in (doc.get("endpoints") or {}):
                raise ConfigInvalid(f"unknown endpoint '{endpoint}'; it was removed meanwhile")
            models = doc.setdefault("models", {})
            old = models.get(alias)
            configfile.check_version(f"model {alias}", old, expect)
            stored = _keep_limits(old, new)
            if old == stored:
                return None
            if model.decider:
                _only_decider(models, alias)
            models[alias] = stored
            return f"model {alias}", old, stored

        configfile.update(self.path, change, by=by)
        return model

    def restore(self, alias: str, *, by: str | None = None) -> bool:
        """Put a retired model back in service; False if it was not retired."""
        return self._set_retired(alias, False, by)

    def retire(self, alias: str, *, by: str | None = None) -> bool:
        """Keep a model out of every panel until it is restored; False if it was retired."""
        return self._set_retired(alias, True, by)

    def _set_retired(self, alias: str, retired: bool, by: str | None) -> bool:
        changed = []

        def change(doc):
            models = doc.setdefault("models", {})
            if alias not in models:
                raise NotFound(f"unknown model '{alias}'; see `panelist model list`")
            if bool(models[alias].get("retired")) == retired:
                return None
            old = dict(models[alias])
            models[alias]["retired"] = retired
            changed.append(alias)
            return f"model {alias}", old, dict(models[alias])

        configfile.update(self.path, change, by=by)
        return bool(changed)

    def set_decider(self, alias: str, *, by: str | None = None) -> bool:
        """Make ``alias`` the decider, clearing the mark on any other; False if it already was."""
        changed = []

        def change(doc):
            models = doc.setdefault("models", {})
            if alias not in models:
                raise NotFound(f"unknown model '{alias}'; see `panelist model list`")
            if models[alias].get("decider"):
                return None
            old = dict(models[alias])
            _only_decider(models, alias)
            models[alias]["decider"] = True
            changed.append(alias)
            return f"model {alias}", old, dict(models[alias])

        configfile.update(self.path, change, by=by)
        return bool(changed)

    def remove_model(self, alias: str, *, by: str | None = None) -> None:
        def change(doc):
            models = doc.setdefault("models", {})
            if alias not in models:
                raise NotFound(f"unknown model '{alias}'; see `panelist model list`")
            return f"model {alias}", models.pop(alias), None

        configfile.update(self.path, change, by=by)

    def limits(self, kind: str, name: str) -> CallLimits:
        """The limits of endpoint ``name`` (``kind`` "endpoint") or model ``name`` ("model");
        NotFound when there is no such endpoint or model."""
        section, view = self._section(kind), self.view()
        if name not in getattr(view, section):
            raise NotFound(f"unknown {kind} '{name}'; see `panelist {kind} list`")
        return getattr(view, f"{kind}_limits").get(name, NO_LIMITS)

    def set_limits(
        self, kind: str, name: str, changes: dict, *, clear: bool = False, by: str | None = None
    ) -> CallLimits:
        """Set the limits named in ``changes`` (``{"rpm": 60, "max_concurrent": 4}``; None
        removes one) on endpoint or model ``name``, after removing them all when ``clear``; the
        others stay as they are. Returns the limits now stored."""
        section = self._section(kind)
        unknown = sorted(set(changes) - set(LIMIT_FIELDS))
        if unknown:
            raise ConfigInvalid(
                f"unknown limit(s) {', '.join(unknown)}; use {' or '.join(LIMIT_FIELDS)}",
                param=unknown[0],
            )
        checked = {k: check_limit(k, v) for k, v in changes.items()}
        result = []

        def change(doc):
            entries = doc.setdefault(section, {})
            if name not in entries:
                raise NotFound(f"unknown {kind} '{name}'; see `panelist {kind} list`")
            old = entries[name]
            new = {k: v for k, v in old.items() if not (clear and k in LIMIT_FIELDS)}
            for k, v in checked.items():
                if v is None:
                    new.pop(k, None)
                else:
                    new[k] = v
            result.append(_read_limits(new))
            if new == old:
                return None
            entries[name] = new
            return f"{kind} {name}", old, new

        configfile.update(self.path, change, by=by)
        return result[0]

    @staticmethod
    def _section(kind: str) -> str:
        if kind not in ("endpoint", "model"):
            raise ValueError(f"limits belong to an endpoint or a model, not {kind!r}")
        return kind + "s"
