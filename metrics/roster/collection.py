"""Collections (named panels) and the gateway's limits.

``config/collections.json`` holds ``{"collections": {name: {members, description, tags, shape,
reply, merger, explorer_policy}}}``; ``config/gateway.json`` holds the limits. A caller asks for a collection as
the model ``bench/<name>``, optionally suffixed with a reply mode: ``:all`` (every answer,
labelled), ``:merged`` (one answer a merger writes from them) or ``:pick`` (one seat's answer,
verbatim, for agents and structured output). Explorer seats per panel:
``min(max_explorers, max_calls - members)``, never below zero. Names say what a collection is for
(lower-case letters, digits, '-'); there is no default collection: naming none, or one that does
not exist, is refused with every collection listed so the caller learns how to choose.
A shape is one lower-case word fixed on the collection, or ``auto``: each prompt is then labelled
by the roster's decider model within ``decider_budget`` seconds (``decider.py``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from panelist.metrics.store import configfile
from panelist.metrics.errors import BadRequest, ConfigInvalid, NotFound
from panelist.metrics.home import Home
from panelist.metrics.plaintext import first_control
from panelist.metrics.roster.roster import RosterView

PREFIX = "bench/"
NAME = re.compile(r"[a-z0-9-]{1,64}")
TAG = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
SHAPE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
# a collection whose shape is AUTO has each prompt labelled by the roster's decider (decider.py)
AUTO = "auto"
REPLIES = ("all", "merged", "pick")  # the reply modes; the first is the default
# how explorer seats are chosen (``seating.py``, ``explore.py``); the first is the default
EXPLORER_POLICIES = ("staleness", "thompson")
MAX_DESCRIPTION = 300
MAX_TAGS = 8


@dataclass(frozen=True)
class Limits:
    max_explorers: int = 2
    max_calls: int = 5
    seat_timeout: float = 120.0  # seconds one seat may take
    panel_timeout: float = 300.0  # seconds the whole request may take, merge included
    cooldown: float = 60.0  # seconds a rate-limited model rests when the upstream names none
    max_cooldown: float = 3600.0  # the longest rest an upstream's Retry-After can impose
    decider_budget: float = 2.0  # seconds the decision model may take to label an `auto` panel
    # seconds a streamed answer may pause between tokens once its first went out; past it the
    # stream ends with an error (PANELIST_STALL_TIMEOUT, when set, overrides it)
    stall_timeout: float = 30.0


@dataclass(frozen=True)
class Collection:
    name: str
    members: tuple[str, ...]
    description: str = ""
    tags: tuple[str, ...] = ()
    shape: str = ""
    reply: str = "all"
    merger: str = ""
    explorer_policy: str = "staleness"

    @property
    def model_id(self) -> str:
        return PREFIX + self.name

    def explorers(self, limits: Limits) -> int:
        return max(0, min(limits.max_explorers, limits.max_calls - len(self.members)))

    def public(self) -> dict:
        d = asdict(self)
        d["members"], d["tags"] = list(self.members), list(self.tags)
        return d


def _parse_collections(doc: dict) -> dict[str, Collection]:
    out = {}
    for name, c in (doc.get("collections") or {}).items():
        out[name] = Collection(
            name=name,
            members=tuple(c.get("members") or ()),
            description=c.get("description", ""),
            tags=tuple(c.get("tags") or ()),
            shape=c.get("shape", ""),
            reply=c.get("reply", "all"),
            merger=c.get("merger", ""),
            explorer_policy=c.get("explorer_policy") or "staleness",
        )
    return out


def _stored_limits(doc: dict) -> dict:
    """The limits gateway.json sets (the defaults fill in the rest)."""
    return {k: doc[k] for k in Limits.__dataclass_fields__ if k in doc}


def _parse_limits(doc: dict) -> Limits:
    return check_limits({k: v for k, v in doc.items() if k in Limits.__dataclass_fields__})


def check_limits(values: dict, where: str = "gateway.json") -> Limits:
    """``values`` as Limits, or a refusal naming the limit (and ``where`` it was read, for a
    file; a write names the limit only, since the caller typed a value, not a file)."""
    limits = Limits(**values)
    at = f"{where}: " if where else ""

    def refuse(name, rule):
        raise ConfigInvalid(f"{at}{name} must be {rule}; got {getattr(limits, name)!r}", param=name)

    for name in ("max_explorers", "max_calls"):
        v = getattr(limits, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            refuse(name, "a whole number of 0 or more")
    if limits.max_calls < 1:
        refuse("max_calls", "at least 1")
    for name in (
        "seat_timeout",
        "panel_timeout",
        "cooldown",
        "max_cooldown",
        "decider_budget",
        "stall_timeout",
    ):
        v = getattr(limits, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            refuse(name, "a number of seconds above 0")
    return limits


def parse_model_name(model) -> tuple[str, str | None]:
    """``bench/<name>[:all|:merged|:pick]`` -> (name, reply override or None)."""
    if model is None or model == "":
        raise BadRequest("no collection named", param="model")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string such as 'bench/<collection>'", param="model")
    name, _, mode = model.partition(":")
    if mode and mode not in REPLIES:
        raise BadRequest(
            f"unknown reply mode ':{mode}' in '{model}'; use one of "
            + ", ".join(f"':{r}'" for r in REPLIES),
            param="model",
        )
    if not name.startswith(PREFIX):
        raise NotFound(f"'{model}' is not a collection", param="model")
    return name[len(PREFIX) :], mode or None


class Collections:
    """Reads and writes one data folder's collections and limits."""

    def __init__(self, home: Home):
        self.path = home.file("collections.json")
        self._cache = configfile.Cached(self.path, _parse_collections)
        self._limits = configfile.Cached(home.file("gateway.json"), _parse_limits)
        self._versions = configfile.Cached(
            self.path,
            lambda doc: {
                name: configfile.version_of(c) for name, c in (doc.get("collections") or {}).items()
            },
        )
        self._limits_version = configfile.Cached(
            self._limits.path, lambda doc: configfile.version_of(_stored_limits(doc))
        )

    def all(self) -> dict[str, Collection]:
        return self._cache.get()

    def limits(self) -> Limits:
        return self._limits.get()

    def menu(self) -> str:
        """Every collection with its description and tags, for refusals that must teach."""
        items = sorted(self.all().values(), key=lambda c: c.name)
        if not items:
            return "there are no collections yet; make one with `panelist collection save`"
        lines = []
        for c in items:
            tags = f" [{', '.join(c.tags)}]" if c.tags else ""
            lines.append(f"{c.model_id}{tags}: {c.description or '(no description)'}")
        return "ask for one of: " + "; ".join(lines)

    def resolve(self, model) -> tuple[Collection, str | None]:
        """The collection a request's ``model`` names, and its reply override."""
        try:
            name, mode = parse_model_name(model)
        except BadRequest as exc:
            raise BadRequest(f"{exc.message}; {self.menu()}", param="model") from None
        except NotFound as exc:
            raise NotFound(f"{exc.message}; {self.menu()}", param="model") from None
        found = self.all().get(name)
        if found is None:
            raise NotFound(f"unknown collection '{PREFIX}{name}'; {self.menu()}", param="model")
        return found, mode

    def using(self, alias: str) -> list[str]:
        return sorted(
            c.name for c in self.all().values() if alias in c.members or c.merger == alias
        )

    def save(
        self,
        roster: RosterView,
        name: str,
        members,
        *,
        description: str = "",
        tags=(),
        shape: str = "",
        reply: str = "all",
        merger: str = "",
        explorer_policy: str = "staleness",
        by: str | None = None,
        expect: str | None = None,
    ) -> Collection:
        """Create or replace a collection. ``expect``: see ``configfile.check_version``."""
        c = check_collection(
            roster,
            self.limits(),
            name,
            members,
            description=description,
            tags=tags,
            shape=shape,
            reply=reply,
            merger=merger,
            explorer_policy=explorer_policy,
        )
        new = {k: v for k, v in c.public().items() if k != "name"}

        def change(doc):  # under c.name: "bench/x" was given as the model id of "x"
            cols = doc.setdefault("collections", {})
            old = cols.get(c.name)
            configfile.check_version(f"collection {c.model_id}", old, expect)
            if old == new:
                return None
            cols[c.name] = new
            return f"collection {c.name}", old, new

        configfile.update(self.path, change, by=by)
        return c

    def set_limits(
        self, values: dict, *, version: str | None = None, by: str | None = None
    ) -> Limits:
        """Replace the limits named in ``values`` (the others stay), validated as a whole."""
        unknown = sorted(set(values) - set(Limits.__dataclass_fields__))
        if unknown:
            raise ConfigInvalid(
                f"unknown limit(s) {', '.join(unknown)}; the limits are "
                f"{', '.join(Limits.__dataclass_fields__)}"
            )
        path = self._limits.path
        result = []

        def change(doc):
            old = _stored_limits(doc)
            configfile.check_version("the gateway limits", old, version)
            new = dict(old, **values)
            result.append(check_limits(new, where=""))
            if new == old:
                return None
            doc.update(new)
            return "limits", old, new

        configfile.update(path, change, by=by)
        return result[0]

    def versions(self) -> dict:
        """``{"collections": {name: version}, "limits": version}`` of what is stored, for
        edits that must not overwrite a change made meanwhile; worked out once per change."""
        return {"collections": self._versions.get(), "limits": self._limits_version.get()}

    def remove(self, name: str, *, by: str | None = None) -> None:
        name = name.removeprefix(PREFIX)

        def change(doc):
            cols = doc.setdefault("collections", {})
            if name not in cols:
                raise NotFound(f"unknown collection '{name}'; see `panelist collection list`")
            return f"collection {name}", cols.pop(name), None

        configfile.update(self.path, change, by=by)


def _words(value, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [w for w in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(w, str) for w in value):
        raise ConfigInvalid(f"{what} must be a list of strings (or a comma-separated string)")
    return tuple(w.strip() for w in value if w.strip())


def check_collection(
    roster: RosterView,
    limits: Limits,
    name: str,
    members,
    *,
    description: str = "",
    tags=(),
    shape: str = "",
    reply: str = "all",
    merger: str = "",
    explorer_policy: str = "staleness",
) -> Collection:
    if isinstance(name, str) and name.startswith(PREFIX):
        name = name[len(PREFIX) :]
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigInvalid(
            f"collection name '{name}' is not valid: use 1-64 lower-case "
            "letters, digits or '-' (it is asked for as bench/<name>)"
        )
    members = _words(members, "members")
    if not members:
        raise ConfigInvalid("a collection needs at least one member (--members a,b,c)")
    if len(set(members)) != len(members):
        raise ConfigInvalid("members must not repeat a model")
    if len(members) > limits.max_calls:
        raise ConfigInvalid(
            f"{len(members)} members exceed max_calls {limits.max_calls} "
            "(gateway.json); two to four members are recommended"
        )
    unknown = [m for m in members if m not in roster.models]
    if unknown:
        raise ConfigInvalid(
            f"unknown model(s) {', '.join(unknown)}; add them with `panelist model add` first"
        )
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ConfigInvalid(
            f"description must be text of at most {MAX_DESCRIPTION} characters "
            "saying what the collection is for"
        )
    if bad := first_control(description):
        raise ConfigInvalid(
            f"description holds a control character ({bad}); write it as one line of plain text"
        )
    tags = _words(tags, "tags")
    if len(tags) > MAX_TAGS:
        raise ConfigInvalid(f"at most {MAX_TAGS} tags, got {len(tags)}")
    bad_tags = [t for t in tags if not TAG.fullmatch(t)]
    if bad_tags:
        raise ConfigInvalid(
            f"tag(s) {', '.join(bad_tags)} not valid: use lower-case words (letters, digits, '-')"
        )
    if len(set(tags)) != len(tags):
        raise ConfigInvalid("tags must not repeat")
    shape = shape or ""
    if shape and not SHAPE.fullmatch(shape):
        raise ConfigInvalid(
            f"shape '{shape}' is not valid: one lower-case word such as review, "
            f"or '{AUTO}' to have the decider model label each prompt"
        )
    if reply not in REPLIES:
        raise ConfigInvalid(f"reply must be one of {', '.join(REPLIES)}, got {reply!r}")
    merger = merger or ""
    if merger and merger not in roster.models:
        raise ConfigInvalid(f"unknown merger model '{merger}'; add it with `panelist model add`")
    explorer_policy = explorer_policy or "staleness"
    if explorer_policy not in EXPLORER_POLICIES:
        raise ConfigInvalid(
            f"explorer_policy must be one of {', '.join(EXPLORER_POLICIES)}, "
            f"got {explorer_policy!r} (staleness rotates explorer seats by "
            "wait; thompson seats the candidates likeliest to beat a member)"
        )
    return Collection(
        name=name,
        members=members,
        description=description.strip(),
        tags=tags,
        shape=shape,
        reply=reply,
        merger=merger,
        explorer_policy=explorer_policy,
    )
