"""The catalog: what is known about each model an endpoint serves, and where it was learned.

Stored in ``config/catalog.json`` as ``{"endpoints": {endpoint: {served id: {fact: {"value",
"source", "at", "from"}}}}}``, rewritten atomically under the config lock
(``configfile.update``), so an import, a refresh and a discover on one data folder never lose
each other's facts. Facts: ``FACTS``; sources: ``typed`` (the roster, never stored here),
``endpoint`` (its ``GET /models``), ``imported`` (a models.dev-layout file), ``learned`` (an
upstream's failure: the window a context-length error states, the cap a refused output budget
states, the wait a rate limit's Retry-After asks, ``tools: false`` from a refusal of tools).
Learned facts sit beside the others, under the model's ``"learned"`` key.

Invariants:
- A fact typed on the roster wins over anything here; ``facts()`` shows it with source ``typed``.
- An import fills only what is missing or was itself imported: it never overwrites what an
  endpoint said. A refresh overwrites imported and older endpoint facts: the endpoint is the
  live truth about what it serves.
- A price that was 0 and is now above 0 raises one ``went_paid`` alert, on the refresh that
  first sees it (the new price is stored, so the next refresh does not raise it again).
- A learned fact never replaces a typed or listed one; it is shown beside it. A learned window
  or max output only ever goes down (a failure at 32k says nothing about a window above it,
  and an endpoint behind which two caps answer is asked within the lower); a learned
  Retry-After is the latest one heard.
- Nothing here holds a key: endpoints are called with the key their environment variable holds.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from panelist.metrics.store import configfile, jsonwire, readfile
from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import ConfigInvalid, NotFound, PanelistError
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import ALIAS, CURRENCY, Roster, RosterView

FACTS = (
    "context",
    "max_output",
    "vision",
    "tools",
    "structured_output",
    "price_in",
    "price_out",
    "currency",
    "rpm",
    "max_concurrent",
    "family",
)
TYPED, ENDPOINT, IMPORTED, LEARNED = "typed", "endpoint", "imported", "learned"
LEARNED_FACTS = ("context", "max_output", "retry_after", "tools")
LOWERING = ("context", "max_output")  # learned facts that only ever go down
LISTING_TIMEOUT = 20.0
MAX_IMPORT_BYTES = 64 * 1024 * 1024


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _learnable(fact: str, value) -> bool:
    """A learned tools fact is only ever ``False`` (a refusal); the others are counts."""
    return value is False if fact == "tools" else _count(value) is not None


def _money(v) -> float | None:
    if isinstance(v, str):  # some listings send prices as decimal strings
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def _clean(facts: dict) -> dict:
    """Only the facts with a value of the right kind; everything else is left unknown."""
    out: dict[str, Any] = {}
    for name in ("context", "max_output", "rpm", "max_concurrent"):
        if (v := _count(facts.get(name))) is not None:
            out[name] = v
    for name in ("vision", "tools", "structured_output"):
        if isinstance(facts.get(name), bool):
            out[name] = facts[name]
    for name in ("price_in", "price_out"):
        if (amount := _money(facts.get(name))) is not None:
            out[name] = round(amount, 6)
    if isinstance(facts.get("currency"), str) and CURRENCY.fullmatch(facts["currency"]):
        out["currency"] = facts["currency"]
    family = facts.get("family")
    if isinstance(family, str) and ALIAS.fullmatch(family.strip()):
        out["family"] = family.strip().lower()
    return out


def servable(entry: dict) -> bool:
    """A listing entry whose id could be a roster model's served id (1-200 characters);
    others are left out, so a hostile listing cannot fill the catalog with junk ids."""
    return 0 < len(entry["id"].strip()) and len(entry["id"]) <= 200


def from_listing(entry: dict) -> dict:
    """The facts one entry of a ``GET /models`` listing states. Read as many providers send
    them: ``context_length``, ``pricing.prompt`` / ``pricing.completion`` in currency per
    token, ``top_provider.max_completion_tokens``, ``architecture.input_modalities``,
    ``supported_parameters``."""
    facts: dict = {"context": entry.get("context_length") or entry.get("context_window")}
    top = entry.get("top_provider")
    if isinstance(top, dict):
        facts["max_output"] = top.get("max_completion_tokens")
    pricing = entry.get("pricing")
    if isinstance(pricing, dict):
        for ours, theirs in (("price_in", "prompt"), ("price_out", "completion")):
            per_token = _money(pricing.get(theirs))
            if per_token is not None:
                facts[ours] = per_token * 1_000_000
        if facts.get("price_in") is not None or facts.get("price_out") is not None:
            facts["currency"] = "USD"
    arch = entry.get("architecture")
    if isinstance(arch, dict) and isinstance(arch.get("input_modalities"), list):
        facts["vision"] = "image" in arch["input_modalities"]
    params = entry.get("supported_parameters")
    if isinstance(params, list):
        facts["tools"] = "tools" in params
        facts["structured_output"] = "structured_outputs" in params or "response_format" in params
    return _clean(facts)


def _table(model: dict, name: str) -> dict:
    """``model[name]`` when it is a JSON object, else an empty one."""
    value = model.get(name)
    return value if isinstance(value, dict) else {}


def from_models_dev(model: dict) -> dict:
    """The facts of one model of a models.dev-layout file."""
    limit, cost, modalities = (_table(model, k) for k in ("limit", "cost", "modalities"))
    facts = {
        "context": limit.get("context"),
        "max_output": limit.get("output"),
        "price_in": cost.get("input"),
        "price_out": cost.get("output"),
        "tools": model.get("tool_call"),
        "structured_output": model.get("structured_output"),
        "family": model.get("family"),
    }
    if isinstance(modalities.get("input"), list):
        facts["vision"] = "image" in modalities["input"]
    if _money(cost.get("input")) is not None or _money(cost.get("output")) is not None:
        facts["currency"] = "USD"
    return _clean(facts)


def typed_facts(view: RosterView, alias: str) -> dict:
    """What the roster states about a model; False flags and unset numbers state nothing."""
    m = view.models[alias]
    facts = {
        k: getattr(m, k)
        for k in ("context", "max_output", "price_in", "price_out")
        if getattr(m, k) is not None
    }
    facts.update({k: True for k in ("vision", "tools") if getattr(m, k)})
    if m.family_typed:
        facts["family"] = m.family
    if "price_in" in facts or "price_out" in facts:
        facts["currency"] = m.currency
    limits = view.model_limits.get(alias)
    if limits:
        facts.update({k: v for k, v in limits.public().items() if v is not None})
    return facts


def load_import(path: str | Path) -> dict[str, dict]:
    """``{model id: facts}`` from a models.dev-layout file (providers → models); a model is
    also known as ``provider/model``, the way aggregators serve it."""
    p = Path(path)
    if not p.exists():
        raise NotFound(f"no catalog file {p}; give the path of a models.dev-layout JSON file")
    raw = readfile.read_bytes(
        p, limit=MAX_IMPORT_BYTES, what="models.dev-layout JSON file (a catalog)"
    )
    return parse_import(raw, str(p))


def parse_import(raw: bytes | str, name: str) -> dict[str, dict]:
    """``load_import`` of a file's contents already read (an upload); ``name`` says which file
    in a refusal."""
    p = name
    if len(raw) > MAX_IMPORT_BYTES:
        raise ConfigInvalid(
            f"{p} is larger than {MAX_IMPORT_BYTES // 2**20} MiB; import a smaller catalog file"
        )
    try:
        doc = jsonwire.loads(raw.encode("utf-8") if isinstance(raw, str) else raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigInvalid(f"{p} is not valid JSON ({exc}); check the file") from exc
    if not isinstance(doc, dict) or not any(
        isinstance(v, dict) and isinstance(v.get("models"), dict) for v in doc.values()
    ):
        raise ConfigInvalid(
            f"{p} is not in the models.dev layout: expected an object of "
            "providers, each with a 'models' object"
        )
    known: dict[str, dict] = {}
    for provider, body in doc.items():
        if not isinstance(body, dict) or not isinstance(body.get("models"), dict):
            continue
        for key, model in body["models"].items():
            if not isinstance(model, dict):
                continue
            facts = from_models_dev(model)
            ids = {key, model.get("id") if isinstance(model.get("id"), str) else key}
            for mid in ids:
                known.setdefault(mid, facts)
                known.setdefault(f"{provider}/{mid}", facts)
    return known


def stored_entry(stored: dict, endpoint: str, served: str) -> dict:
    """``{fact: {...}}`` stored for one served model in ``Catalog.stored()``: {} when nothing
    is, or the (hand-edited) file holds something else there."""
    by_endpoint = stored.get(endpoint)
    entry = by_endpoint.get(served) if isinstance(by_endpoint, dict) else None
    return (
        {k: v for k, v in entry.items() if isinstance(v, dict) and "value" in v}
        if isinstance(entry, dict)
        else {}
    )


def stored_learned(stored: dict, endpoint: str, served: str) -> dict:
    """``{fact: {"value", "at", "from"}}`` learned for one served model; {} when none is."""
    by_endpoint = stored.get(endpoint)
    entry = by_endpoint.get(served) if isinstance(by_endpoint, dict) else None
    learned = entry.get(LEARNED) if isinstance(entry, dict) else None
    if not isinstance(learned, dict):
        return {}
    return {
        k: v
        for k, v in learned.items()
        if k in LEARNED_FACTS and isinstance(v, dict) and _learnable(k, v.get("value"))
    }


def _entry(doc: dict, endpoint: str, served: str) -> dict:
    """The stored entry of one served model in the catalog document, made if missing; a
    hand-edited file may hold anything, and what is not an object is replaced."""
    endpoints = doc.get("endpoints")
    if not isinstance(endpoints, dict):
        endpoints = doc["endpoints"] = {}
    if not isinstance(endpoints.get(endpoint), dict):
        endpoints[endpoint] = {}
    if not isinstance(endpoints[endpoint].get(served), dict):
        endpoints[endpoint][served] = {}
    return endpoints[endpoint][served]


class Catalog:
    """The catalog of one data folder."""

    def __init__(self, home: Home):
        self.home = home
        self.path = home.file("catalog.json")
        self.roster = Roster(home)

    def stored(self) -> dict:
        endpoints = configfile.read(self.path).get("endpoints")
        return endpoints if isinstance(endpoints, dict) else {}

    def stored_facts(self, endpoint: str, served: str) -> dict:
        return stored_entry(self.stored(), endpoint, served)

    def facts(self, alias: str) -> dict[str, dict]:
        """``{fact: {"value", "source", "at", "from"}}`` of a roster model, typed facts first."""
        view = self.roster.view()
        if alias not in view.models:
            raise NotFound(f"unknown model '{alias}'; see `panelist model list`")
        m = view.models[alias]
        stored = self.stored()
        known = dict(stored_entry(stored, m.endpoint, m.served))
        for name, value in typed_facts(view, alias).items():
            known[name] = {"value": value, "source": TYPED, "at": None, "from": "roster"}
        for name, fact in stored_learned(stored, m.endpoint, m.served).items():
            if name in known:
                known[name] = dict(known[name], learned=fact)
            else:
                known[name] = dict(fact, source=LEARNED)
        return {k: known[k] for k in dict.fromkeys(FACTS + LEARNED_FACTS) if k in known}

    def learn(self, endpoint: str, served: str, fact: str, value: int | bool, origin: str) -> bool:
        """Keep what an upstream's failure taught about a model; True if the catalog changed.
        A window or a max output is kept only when lower than the one learned before."""
        if fact not in LEARNED_FACTS or not _learnable(fact, value):
            raise ValueError(f"not a learned fact: {fact}={value!r}")
        changed = []

        def change(doc):
            entry = _entry(doc, endpoint, served)
            if not isinstance(entry.get(LEARNED), dict):
                entry[LEARNED] = {}
            old = stored_learned(doc["endpoints"], endpoint, served).get(fact)
            if old and (old["value"] <= value if fact in LOWERING else old["value"] == value):
                return None
            entry[LEARNED][fact] = {"value": value, "at": configfile.now_iso(), "from": origin}
            changed.append(True)
            return (
                f"catalog learned {fact} of {endpoint}:{served}",
                old["value"] if old else None,
                value,
            )

        configfile.update(self.path, change, by="catalog")
        return bool(changed)

    def store(
        self,
        updates: list[tuple[str, str, dict, str, str]],
        what: str,
        *,
        typed_free: set | None = None,
        outcome: dict | None = None,
    ) -> list[dict]:
        """Store ``(endpoint, served, facts, source, origin)`` under the lock; returns the price
        changes from 0 to above 0 it made, for the caller to alert. ``typed_free``: the
        ``(endpoint, served, fact)`` prices typed as 0, the price before when none is stored.
        ``outcome``: filled with ``{(endpoint, served): {fact: added | changed | same | kept}}``
        (kept: an endpoint's fact an import left as it was)."""
        typed_free = typed_free or set()
        now = configfile.now_iso()
        paid: list[dict] = []

        def change(doc):
            changed = 0
            said = {} if outcome is None else outcome
            said.clear()  # a retried change starts again from the file as it is now
            for endpoint, served, facts, source, origin in updates:
                entry = _entry(doc, endpoint, served)
                mine = said.setdefault((endpoint, served), {})
                for name, value in facts.items():
                    old = entry.get(name) if isinstance(entry.get(name), dict) else None
                    if source == IMPORTED and old and old.get("source") != IMPORTED:
                        mine[name] = "kept"  # an import fills gaps; it never overrides one
                        continue
                    if old and old.get("value") == value and old.get("source") == source:
                        mine[name] = "same"
                        continue
                    mine[name] = "changed" if old else "added"
                    was = (
                        old.get("value")
                        if old
                        else (0 if (endpoint, served, name) in typed_free else None)
                    )
                    if (
                        source == ENDPOINT
                        and name in ("price_in", "price_out")
                        and was == 0
                        and value > 0
                    ):
                        paid.append(
                            {"endpoint": endpoint, "served": served, "fact": name, "value": value}
                        )
                    entry[name] = {"value": value, "source": source, "at": now, "from": origin}
                    changed += 1
            return (what, None, f"{changed} fact(s)") if changed else None

        configfile.update(self.path, change, by="catalog")
        return paid

    def import_file(self, path: str | Path) -> dict:
        """Fill the missing facts of roster models whose served id the file knows."""
        return self.import_known(load_import(path), Path(path).name, str(path))

    def import_known(self, known: dict[str, dict], name: str, file: str | None = None) -> dict:
        """``import_file`` of a catalog already read (``load_import``, ``parse_import``): per
        roster model the file knows, the facts it filled (``facts``), and of those which were
        ``added``, ``changed`` or left ``same``; the facts ``kept`` as an endpoint stated them
        and those ``typed`` on the roster (neither is ever overwritten); ``unmatched``: the
        roster models the file does not know."""
        view = self.roster.view()
        updates, matched = [], []
        for alias, m in sorted(view.models.items()):
            facts = known.get(m.served)
            if facts is None:
                continue
            typed = typed_facts(view, alias)
            fill = {k: v for k, v in facts.items() if k not in typed}
            matched.append(
                {
                    "alias": alias,
                    "served": m.served,
                    "endpoint": m.endpoint,
                    "facts": sorted(fill),
                    "typed": sorted(k for k in facts if k in typed),
                }
            )
            updates.append((m.endpoint, m.served, fill, IMPORTED, name))
        outcome: dict = {}
        self.store(updates, f"catalog import {name}", outcome=outcome)
        for row in matched:
            said = outcome.get((row.pop("endpoint"), row["served"]), {})
            for what in ("added", "changed", "same", "kept"):
                row[what] = sorted(k for k, v in said.items() if v == what)
            row["facts"] = sorted(set(row["facts"]) - set(row["kept"]))
        unmatched = sorted(a for a in view.models if a not in {x["alias"] for x in matched})
        return {"file": file or name, "matched": matched, "unmatched": unmatched}

    def listing(self, upstream, endpoint: str) -> list[dict]:
        """The entries of one endpoint's ``GET /models``."""
        ep = self.roster.view().endpoints.get(endpoint)
        if ep is None:
            raise NotFound(f"unknown endpoint '{endpoint}'; see `panelist endpoint list`")
        return upstream.models(ep.base_url, self.roster.api_key(ep), timeout=LISTING_TIMEOUT)

    def listings(self, upstream, names: list[str]) -> tuple[list[tuple[str, list]], list[dict]]:
        """``([(endpoint, entries)], [{"endpoint", "error"}])``: each listing read, and each
        endpoint that could not be read with why (the others are read all the same)."""
        read, failed = [], []
        for name in names:
            try:
                read.append((name, self.listing(upstream, name)))
            except PanelistError as exc:
                failed.append({"endpoint": name, "error": exc.message})
        return read, failed

    def refresh(
        self, upstream, endpoints: list[str] | None = None, *, dry_run: bool = False
    ) -> dict:
        """Read each endpoint's listing and store what it states; an endpoint that cannot be
        read is reported and the others are still refreshed. ``dry_run``: store nothing and
        alert nothing; ``would_fill`` lists the facts a refresh would set or change."""
        view = self.roster.view()
        names = endpoints or sorted(view.endpoints)
        for name in names:
            if name not in view.endpoints:
                raise NotFound(f"unknown endpoint '{name}'; see `panelist endpoint list`")
        updates, done = [], []
        read, failed = self.listings(upstream, names)
        for name, entries in read:
            stated = 0
            for entry in filter(servable, entries):
                facts = from_listing(entry)
                if facts:
                    stated += 1
                    updates.append((name, entry["id"], facts, ENDPOINT, "GET /models"))
            done.append({"endpoint": name, "models": len(entries), "with_facts": stated})
        if dry_run:
            stored = self.stored()
            fill = [
                {"endpoint": ep, "served": served, "fact": name, "value": value}
                for ep, served, facts, _, _ in updates
                for name, value in facts.items()
                if (stored_entry(stored, ep, served).get(name) or {}).get("value") != value
            ]
            return {"refreshed": done, "failed": failed, "would_fill": fill}
        # a typed price of 0 with nothing stored yet counts as the price before: an endpoint
        # now asking money for a model the user typed as free is the case worth an alert
        typed_free = {
            (m.endpoint, m.served, k)
            for m in view.models.values()
            for k in ("price_in", "price_out")
            if getattr(m, k) == 0
        }
        paid = self.store(updates, "catalog refresh", typed_free=typed_free)
        alerts = self._went_paid(view, paid)
        return {"refreshed": done, "failed": failed, "went_paid": alerts}

    def _went_paid(self, view: RosterView, paid: list[dict]) -> list[dict]:
        by_model: dict[tuple, dict] = {}
        for p in paid:
            by_model.setdefault((p["endpoint"], p["served"]), {})[p["fact"]] = p["value"]
        if not by_model:
            return []
        aliases = {(m.endpoint, m.served): a for a, m in view.models.items()}
        book = Alerts(self.home)
        raised = []
        try:
            for (endpoint, served), prices in sorted(by_model.items()):
                subject = aliases.get((endpoint, served), f"{endpoint}:{served}")
                said = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in sorted(prices.items()))
                raised.append(
                    book.raise_alert(
                        "went_paid",
                        subject,
                        f"{subject} on {endpoint} is no longer free ({said} per million tokens); "
                        "Retire it, or set its price with Edit, on its model page",
                        endpoint=endpoint,
                        served=served,
                        **prices,
                    )
                )
        finally:
            book.close()
        return raised
