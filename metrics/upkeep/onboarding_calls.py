"""The calls onboarding sends: each written to the queue log before it goes out, and after it ends.

A probe or a quick-run prompt leaves only through ``Asking``, the upstream onboarding hands the
seats core: its ``chat`` appends an ``asking`` line (a call id of its own, what the call is for,
the tasks its prompt asks) and flushes it to disk, then sends, then appends an ``asked`` line
with the outcome (``answered``, or ``failed`` and the error kind). The queue folds both into its
entry's ``calls``.

Invariants:

* No request leaves without its ``asking`` line on disk: the line is appended in one locked
  write and fsynced before the request is made, and if that fails nothing is sent.
* Onboarding never sends a call twice. A step taken up again after its process died or stopped
  sends none of what its ``asking`` lines name: a call without an ``asked`` line is one whose
  outcome is unknown (it was in flight), and is given the ``asked`` line ``interrupted``
  (``settle``); a call cut by a stop (``failed``, kind ``cancelled``) counts the same. What the
  step decides from that is the worker's (``onboarding_worker``): an interrupted probe ends the
  entry ``failed``, interrupted prompts leave their tasks unscored.
* A call's own outcome wins over an ``interrupted`` written for it by a later process (a call
  thread that outlived its step may still end): the fold keeps the first outcome that is not
  ``interrupted``.
* Only ``chat`` exists here: any other way to send (a stream) is refused by its absence rather
  than sent unrecorded.
"""

from __future__ import annotations

import secrets
import time

from panelist.metrics.errors import UpstreamError

PROBE, SUITE = "probe", "suite"
CUT = "interrupted"


def new_id() -> str:
    return f"c{secrets.token_hex(8)}"


class Asking:
    """An upstream that records each chat of entry ``eid`` in ``queue`` around sending it
    through ``upstream``. ``tasks_of(body)``: the task ids a suite prompt asks."""

    def __init__(self, upstream, queue, eid: str, alias: str, purpose: str, tasks_of=None):
        self.upstream, self.queue = upstream, queue
        self.eid, self.alias, self.purpose = eid, alias, purpose
        self.tasks_of = tasks_of

    def chat(
        self,
        base_url: str,
        api_key: str | None,
        body: dict,
        *,
        timeout: float,
        cancel=None,
        messages_json: bytes | None = None,
        on_release=None,
    ):
        """``Upstream.chat``'s, recorded around the call; ``on_release`` runs once, always."""
        call = new_id()
        intent = {
            "entry": self.eid,
            "alias": self.alias,
            "event": "asking",
            "call": call,
            "for": self.purpose,
        }
        if self.tasks_of is not None:
            intent["tasks"] = self.tasks_of(body)
        try:  # raises before sending when it cannot be kept
            self.queue.append(intent, sync=True)
        except BaseException:
            if on_release is not None:  # nothing was sent
                on_release()
            raise
        t0 = time.monotonic()
        try:
            answer = self.upstream.chat(
                base_url,
                api_key,
                body,
                timeout=timeout,
                cancel=cancel,
                messages_json=messages_json,
                on_release=on_release,
            )
        except UpstreamError as exc:
            self._ended(call, t0, "failed", exc.kind)
            raise
        except Exception:
            self._ended(call, t0, "failed", "internal")
            raise
        self._ended(call, t0, "answered", "")
        return answer

    def _ended(self, call: str, t0: float, outcome: str, kind: str) -> None:
        line = {
            "entry": self.eid,
            "alias": self.alias,
            "event": "asked",
            "call": call,
            "outcome": outcome,
            "seconds": round(time.monotonic() - t0, 3),
        }
        if kind:
            line["error_kind"] = kind
        try:
            self.queue.append(line)
        except OSError:
            pass  # a full disk must not lose the answer; the call then reads as interrupted


def of(entry: dict, purpose: str) -> list[dict]:
    """The calls entry ``entry`` sent for ``purpose``, in the order they were sent."""
    return [c for c in entry.get("calls", {}).values() if c["for"] == purpose]


def cut(call: dict) -> bool:
    """Whether nobody read the answer of a sent call: in flight when its process died, or cut
    by a stop."""
    return call["outcome"] in (None, CUT) or (
        call["outcome"] == "failed" and call.get("error_kind") == "cancelled"
    )


def settle(queue, eid: str) -> list[dict]:
    """Give every call of ``eid`` still without an outcome its ``asked`` line ``interrupted``
    (their sender is gone: only the worker holding the lock sends); returns them."""
    entry = queue.entry(eid)
    open_ = [c for c in entry.get("calls", {}).values() if c["outcome"] is None]
    if open_:
        queue.append(
            *(
                {
                    "entry": eid,
                    "alias": entry["alias"],
                    "event": "asked",
                    "call": c["call"],
                    "outcome": CUT,
                }
                for c in open_
            )
        )
    return open_


def sent_tasks(entry: dict, chosen: list[str]) -> set[str]:
    """The tasks of ``chosen`` a quick run of ``entry`` sent a prompt for (a prompt whose task
    could not be told names them all: it is never sent twice)."""
    sent: set[str] = set()
    for c in of(entry, SUITE):
        named = c.get("tasks")
        if not isinstance(named, list) or not named:
            return set(chosen)
        sent.update(named)
    return sent & set(chosen)


def cut_tasks(entry: dict) -> set[str]:
    """Tasks whose every prompt sent was cut (see ``cut``)."""
    out: dict[str, bool] = {}
    for c in of(entry, SUITE):
        for task in c.get("tasks") or ():
            out[task] = out.get(task, True) and cut(c)
    return {t for t, all_cut in out.items() if all_cut}


def prompt_tasks(tasks: list, known: dict):
    """``tasks_of`` for a quick run of ``tasks``: a prompt's task ids, told by its digest, made
    as the suite makes it (the prompt depends only on the task, the epoch and its pair's key)."""
    from panelist.suite import prompts

    by_digest: dict[str, list[str]] = {}
    for task in tasks:
        content = prompts.messages(task, 1, prompts.focus_of(task, known))[0]["content"]
        by_digest.setdefault(prompts.digest(content), []).append(task.id)

    def tasks_of(body: dict) -> list[str]:
        messages = body.get("messages") or [{}]
        content = messages[0].get("content") if isinstance(messages[0], dict) else None
        return list(by_digest.get(prompts.digest(content), [])) if isinstance(content, str) else []

    return tasks_of
