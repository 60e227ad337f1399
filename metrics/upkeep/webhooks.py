"""Webhooks: alerts pushed to a URL a person watches (a chat channel, a pager, a script).

``config/webhooks.json`` holds ``{"hooks": [{"id", "url", "kinds", "slack", "created"}]}``:
``kinds`` empty means every kind; ``slack`` sends ``{"text": …}`` in place of the plain body
``{"kind", "model", "message", "ts"}``. The file is written with mode 0600 because a webhook URL
usually carries its secret in its path; everything shown or logged uses ``mask(url)``.

The ``Sender`` follows ``runs/alerts.jsonl`` (a server runs one per process), so an alert raised
anywhere on the data folder (a panel's failing watch, a probe, a CLI command) is sent without the
raiser waiting on a network. Invariants:

* Each alert line is claimed once across every process on the data folder: a sender takes
  ``runs/webhooks.json``'s lock, reads the offset delivered so far, advances it past what it
  read and only then sends. A sender that finds no state starts at the log's end, so turning
  webhooks on does not replay history.
* A delivery is tried ``tries`` times with doubling waits; the outcome of each hook's latest
  delivery (sent, or given up with the reason) is kept in ``runs/webhooks.json`` for
  ``panelist alerts webhook list`` and the API to show.
* Nothing here blocks a caller: the sender's thread is the only one that opens a connection,
  except ``send_test``, which a person asks for and waits on.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import threading
import time
import urllib.parse

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.home import Home
from panelist.metrics.store import configfile, jsonl

log = logging.getLogger("panelist.webhooks")

TIMEOUT = 5.0  # seconds one POST may take, connect included
TRIES = 4
BACKOFF = 1.0  # seconds before the first retry; doubled after each
POLL = 1.0  # seconds between looks at the alert log


def mask(url: str) -> str:
    """``url`` with its secret parts hidden: the scheme and host, then the last four characters
    of the path; user info, query and fragment are dropped."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or "?"
    if p.port:
        host = f"{host}:{p.port}"
    tail = p.path.rstrip("/")[-4:]
    return (
        f"{p.scheme}://{host}/…{tail}"
        if len(p.path.strip("/")) > 4
        else f"{p.scheme}://{host}{p.path}"
    )


def check_url(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise BadRequest(
            "a webhook URL must start with http:// or https:// and name a host, "
            "e.g. https://hooks.example.com/T0/B0/secret"
        )
    return url


def body_of(alert: dict, slack: bool) -> dict:
    """The JSON a hook receives for ``alert``."""
    if slack:
        return {"text": f"[{alert.get('kind')}] {alert.get('message')}"}
    return {
        "kind": alert.get("kind"),
        "model": alert.get("subject"),
        "message": alert.get("message"),
        "ts": alert.get("ts"),
    }


class Hooks:
    """The configured webhooks of one data folder."""

    def __init__(self, home: Home):
        self.path = home.file("webhooks.json")
        self.state_path = home.runs / "webhooks.json"
        self.alerts_log = home.alerts_log

    def all(self) -> list[dict]:
        return list(configfile.read(self.path).get("hooks", []))

    def add(
        self, url: str, kinds: list[str] | None = None, slack: bool = False, by: str | None = None
    ) -> dict:
        check_url(url)
        kinds = sorted({k.strip() for k in (kinds or []) if k.strip()})
        made: dict = {}

        def change(doc):
            hooks = doc.setdefault("hooks", [])
            n = 1 + max((int(h["id"][1:]) for h in hooks if h["id"][1:].isdigit()), default=0)
            made.update(
                id=f"w{n}", url=url, kinds=kinds, slack=bool(slack), created=configfile.now_iso()
            )
            hooks.append(dict(made))
            return "webhook added", None, {"id": made["id"], "url": mask(url)}

        configfile.update(self.path, change, by=by, mode=0o600)  # the URLs hold secrets
        self._start_here()
        return made

    def _start_here(self) -> None:
        """With no delivery state yet, mark the alert log's current end as delivered: a hook
        gets the alerts raised after it was added, not the history."""
        with configfile.flocked(self.state_path.with_name("webhooks.json.lock")):
            doc = configfile.read(self.state_path)
            if "offset" not in doc:
                doc["offset"] = _size(self.alerts_log)
                configfile.write_atomic(self.state_path, doc)

    def remove(self, hook_id: str, by: str | None = None) -> None:
        found = []

        def change(doc):
            hooks = doc.get("hooks", [])
            keep = [h for h in hooks if h["id"] != hook_id]
            if len(keep) == len(hooks):
                return None
            found.append(True)
            doc["hooks"] = keep
            return "webhook removed", {"id": hook_id}, None

        configfile.update(self.path, change, by=by, mode=0o600)
        if not found:
            raise NotFound(f"no webhook '{hook_id}'; `panelist alerts webhook list` shows them")

    def public(self) -> list[dict]:
        """Every hook as it may be shown: the URL masked, with its latest delivery."""
        status = configfile.read(self.state_path).get("status", {})
        return [
            {
                "id": h["id"],
                "url": mask(h["url"]),
                "kinds": h.get("kinds") or [],
                "slack": bool(h.get("slack")),
                "created": h.get("created"),
                "last": status.get(h["id"]),
            }
            for h in self.all()
        ]

    def wanting(self, kind: str) -> list[dict]:
        return [h for h in self.all() if not h.get("kinds") or kind in h["kinds"]]

    def note(self, hook_id: str, outcome: dict) -> None:
        """Keep ``outcome`` as the hook's latest delivery."""
        with configfile.flocked(self.state_path.with_name("webhooks.json.lock")):
            doc = configfile.read(self.state_path)
            doc.setdefault("status", {})[hook_id] = outcome
            configfile.write_atomic(self.state_path, doc)


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def post(url: str, body: dict, timeout: float = TIMEOUT) -> None:
    """One POST of ``body`` to ``url``; raises ``OSError`` with a reason that never holds the
    URL when the receiver cannot be reached or does not answer 2xx."""
    p = urllib.parse.urlsplit(url)
    if not p.hostname:  # refused when the hook was added; a hand-edited file may still hold one
        raise OSError("the webhook's URL names no host")
    conn_cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(p.hostname, p.port, timeout=timeout)
    path = (p.path or "/") + (f"?{p.query}" if p.query else "")
    data = json.dumps(body).encode()
    try:
        conn.request(
            "POST",
            path,
            body=data,
            headers={"Content-Type": "application/json", "User-Agent": "panelist-webhook"},
        )
        resp = conn.getresponse()
        resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise OSError(f"not reached ({type(exc).__name__})") from None
    finally:
        conn.close()
    if not 200 <= resp.status < 300:
        raise OSError(f"answered HTTP {resp.status}")


class Sender:
    """Sends each new alert of a data folder to the hooks that want its kind; ``start`` runs it
    on a thread, ``check`` looks once; ``close`` it after."""

    def __init__(
        self,
        home: Home,
        *,
        poll: float = POLL,
        tries: int = TRIES,
        backoff: float = BACKOFF,
        timeout: float = TIMEOUT,
    ):
        self.home, self.hooks = home, Hooks(home)
        self.poll, self.tries, self.backoff, self.timeout = poll, tries, backoff, timeout
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.check()
            except Exception:  # a broken config must not end the thread: say so, look again
                log.exception("webhooks: could not read the alerts or the hooks")
            self._stop.wait(self.poll)

    def _claim(self) -> list[dict]:
        """The alerts appended since the last claim by any process, now claimed by this one."""
        state = self.hooks.state_path
        with configfile.flocked(state.with_name("webhooks.json.lock")):
            doc = configfile.read(state)
            if "offset" not in doc:  # first look: start at the end, replay nothing
                doc["offset"] = _size(self.home.alerts_log)
                configfile.write_atomic(state, doc)
                return []
            tail = jsonl.Tail(self.home.alerts_log, doc["offset"])
            got = [rec for _, rec in tail.read()]
            if tail.offset != doc["offset"]:
                doc["offset"] = tail.offset
                configfile.write_atomic(state, doc)
            return got

    def check(self) -> int:
        """Claim and send what is new; the number of deliveries made or given up."""
        if not self.hooks.all() and not self.hooks.state_path.exists():
            return 0
        done = 0
        for alert in self._claim():
            for hook in self.hooks.wanting(str(alert.get("kind"))):
                self.deliver(hook, alert)
                done += 1
        return done

    def deliver(self, hook: dict, alert: dict) -> dict:
        """Send ``alert`` to ``hook`` with retries; record and return the outcome."""
        wait, reason, tries = self.backoff, "", 0
        while True:
            tries += 1
            try:
                post(hook["url"], body_of(alert, hook.get("slack", False)), self.timeout)
                outcome = {
                    "ok": True,
                    "ts": configfile.now_iso(),
                    "kind": alert.get("kind"),
                    "tries": tries,
                }
                break
            except OSError as exc:
                reason = str(exc)
            # the last try, or closing: give up now with the count so far
            if tries >= self.tries or self._stop.wait(wait):
                outcome = {
                    "ok": False,
                    "ts": configfile.now_iso(),
                    "kind": alert.get("kind"),
                    "tries": tries,
                    "error": f"{reason}; gave up after {tries} tries",
                }
                log.warning("webhook %s (%s): %s", hook["id"], mask(hook["url"]), outcome["error"])
                break
            wait *= 2
        self.hooks.note(hook["id"], outcome)
        return outcome

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def send_test(home: Home, hook_id: str | None = None, *, timeout: float = TIMEOUT) -> list[dict]:
    """Send one test alert, once, to ``hook_id`` (or every hook) and wait: a person pressed a
    button and wants to know now. Each hook's result, the URL masked."""
    hooks = Hooks(home).all()
    if hook_id is not None:
        hooks = [h for h in hooks if h["id"] == hook_id]
        if not hooks:
            raise NotFound(f"no webhook '{hook_id}'; `panelist alerts webhook list` shows them")
    if not hooks:
        raise NotFound("no webhooks yet; add one with `panelist alerts webhook add URL`")
    alert = {
        "kind": "test",
        "subject": None,
        "ts": jsonl.utc_second(time.time()),
        "message": "a test alert from Panelist: this webhook works",
    }
    out = []
    for h in hooks:
        try:
            post(h["url"], body_of(alert, h.get("slack", False)), timeout)
            out.append({"id": h["id"], "url": mask(h["url"]), "ok": True})
        except OSError as exc:
            out.append({"id": h["id"], "url": mask(h["url"]), "ok": False, "error": str(exc)})
    return out
