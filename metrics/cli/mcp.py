"""``panelist mcp``: the Model Context Protocol over stdio, so an agent can consult a panel.

An MCP client (Claude Code, Cursor, any other) starts this as a child process and speaks
JSON-RPC 2.0 to it, one message per line of stdin and stdout. Four tools reach a *running*
gateway over HTTP (``PANELIST_URL``, default http://127.0.0.1:8123) through ``remote``, the
client the command line's ``--url`` uses too: ``list_collections``, ``ask``, ``verdict`` and
``pending``. Nothing here opens the data folder: the gateway seats, logs and judges, exactly as
for any other caller.

Invariants:

* stdout carries protocol messages only: one JSON object a line, UTF-8, no line break inside
  (``json`` escapes them). Logs go to stderr; while serving, a stray ``print`` lands there too.
* Every request (a message with an ``id``) gets exactly one reply; a notification gets none,
  whatever it says. Every line written is strict JSON (RFC 8259): no ``NaN``, no ``Infinity``.
* An id is text or a finite number (JSON-RPC 2.0). A fractional one is answered with the same
  value, though the spec says an id SHOULD NOT have one; ``null`` is refused, as MCP says.
* A message that is not a valid request gets a JSON-RPC error: -32700 (not JSON, ``NaN`` and
  ``Infinity`` included, which Python's decoder would take), -32600 (not a request, or an id
  that is no finite number, such as ``1e400``; answered with id ``null``), -32601 (unknown
  method), -32602 (params the method cannot take, an unknown tool), -32000 (busy, below).
  Arguments a tool cannot use, and every failure of the gateway, are a tool *result* with
  ``isError: true`` whose text says what to do, so the agent reads it and can correct itself
  (the spec's rule since 2025-11-25, SEP-1303).
* The gateway key (``PANELIST_KEY``, read by ``remote``) is sent only in the
  ``Authorization`` header: never in a reply, an error or a log line.
* ``tools/call`` runs on a worker thread (``mcpcalls``), so ``ping`` and quick tools are answered
  while a panel is thinking. At most ``--calls`` (default ``MAX_CALLS``) run at once and
  ``MAX_WAITING`` more wait their turn; a call past that gets -32000 "busy", to be retried. A
  call that carries a progress token gets ``notifications/progress`` every ``PROGRESS_EVERY``
  seconds until its reply, never after it. At the end of stdin the calls still running or
  waiting are answered, then the server exits (a client that will not wait ends it with
  SIGTERM; the gateway then cancels the panel).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import traceback
from typing import Any, Callable
from urllib.parse import urlencode

from panelist import __version__
from panelist.metrics.cli import remote
from panelist.metrics.cli.mcpcalls import MAX_WAITING, Busy, Call, CallPool
from panelist.metrics.cli.remote import ASK_TIMEOUT, DEFAULT_URL, URL_VARIABLE, Remote
from panelist.metrics.errors import PanelistError
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.errors import body_of

# revisions reachable through `initialize`, newest first; a client asking for another gets ours
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_MESSAGE = 32 * 1024 * 1024  # above the gateway's 20 MB body cap, so the gateway says no
MAX_PENDING = 500  # the gateway's own bound for /bench/pending
# while a call runs, a client that asked for progress hears from us this often: some clients
# give up on a call that stays silent for a minute, and a panel may take several
PROGRESS_EVERY = 5.0
# tool calls run at once, each on a worker thread with its own connection to the gateway; up to
# MAX_WAITING more wait for a worker. --calls may raise it to CALLS_LIMIT.
MAX_CALLS, CALLS_LIMIT = 8, 64

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
BUSY = -32000  # JSON-RPC leaves -32000 to -32099 to the server: ours says "busy, retry"


class ToolFailed(Exception):
    """Raised when a tool cannot do its work; becomes a result with ``isError: true``."""

    def __init__(self, message: str, data: dict | None = None):
        super().__init__(message)
        self.message = message
        self.data = data


class ProtocolError(Exception):
    """Raised when a message cannot be served as sent; becomes a JSON-RPC error reply."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# -- tool arguments -------------------------------------------------------------------------------
def check_arguments(schema: dict, args: dict) -> dict:
    """``args`` checked against a tool's input schema (the subset the tools use: required,
    string / boolean / integer / array of strings, enum, minimum, maximum, no other fields)."""
    props = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolFailed(
            f"unknown argument(s) {', '.join(unknown)}; this tool takes {', '.join(props)}"
        )
    for name in schema.get("required", ()):
        if args.get(name) is None:
            raise ToolFailed(f"'{name}' is missing: {props[name]['description']}")
    checked = {}
    for name, value in args.items():
        if value is None:
            continue
        spec = props[name]
        kind = spec["type"]
        if kind == "string":
            ok = isinstance(value, str)
        elif kind == "boolean":
            ok = isinstance(value, bool)
        elif kind == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:  # an array of strings
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not ok:
            what = {
                "string": "text",
                "boolean": "true or false",
                "integer": "a whole number",
                "array": "a list of strings",
            }[kind]
            raise ToolFailed(f"'{name}' must be {what}: {spec['description']}")
        if "enum" in spec and value not in spec["enum"]:
            raise ToolFailed(
                f"'{name}' must be one of {', '.join(spec['enum'])}, not '{str(value)[:50]}'"
            )
        if not spec.get("minimum", value) <= value <= spec.get("maximum", value):
            raise ToolFailed(f"'{name}' must be from {spec['minimum']} to {spec['maximum']}")
        checked[name] = value
    return checked


# -- the tools ------------------------------------------------------------------------------------
def _schema(properties: dict, required: tuple = ()) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


JUDGE = (
    'judge each call with the verdict tool: {"call": "<call id>", "useful": true|false, '
    '"note": "why"}'
)

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_collections",
        "title": "List Panelist collections",
        "description": "The collections (named panels of models) the Panelist gateway serves: "
        "name, description, members, shape and reply modes. Call it to choose a "
        "collection for ask.",
        "inputSchema": _schema({}),
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "ask",
        "title": "Ask a Panelist panel",
        "description": "Ask a collection: every seated model answers the same prompt at once. "
        "Returns the answer (every seat's answer labelled, a merged answer, or one "
        "picked seat's, by reply mode) and each seat's call id, model and status. "
        "Check the answers against the real work, then judge each call with the "
        "verdict tool.",
        "inputSchema": _schema(
            {
                "collection": {
                    "type": "string",
                    "description": "the collection, e.g. reviewers or bench/reviewers "
                    "(see list_collections)",
                },
                "prompt": {"type": "string", "description": "the question or task for the panel"},
                "system": {
                    "type": "string",
                    "description": "an optional system message for every seat",
                },
                "reply": {
                    "type": "string",
                    "enum": ["all", "merged", "pick"],
                    "description": "all: every seat's answer; merged: one answer written from "
                    "them all; pick: the answer of the seat with the best record "
                    "(default: the collection's)",
                },
            },
            required=("collection", "prompt"),
        ),
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": "verdict",
        "title": "Judge a Panelist call",
        "description": "Record whether one call's answer was useful, once checked against the "
        "real work. Verdicts decide which models the gateway seats next; the last "
        "verdict for a call wins.",
        "inputSchema": _schema(
            {
                "call": {
                    "type": "string",
                    "description": "the call id of a seat (from ask or "
                    "pending), e.g. p20260101-7.member2",
                },
                "useful": {
                    "type": "boolean",
                    "description": "true if the answer helped with the real work",
                },
                "note": {"type": "string", "description": "why, in a sentence (optional)"},
                "real": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "claims of the answer you confirmed (optional)",
                },
                "false": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "claims of the answer you found false (optional)",
                },
            },
            required=("call", "useful"),
        ),
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
    {
        "name": "pending",
        "title": "Calls awaiting a verdict",
        "description": "Recent calls that answered and have no verdict yet, newest first.",
        "inputSchema": _schema(
            {
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_PENDING,
                    "description": f"how many to list, 1 to {MAX_PENDING} (default 20)",
                }
            }
        ),
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
]
TOOL_NAMES: tuple[str, ...] = tuple(t["name"] for t in TOOLS)


def list_collections(gw: Remote, _args: dict) -> tuple[str, dict]:
    listed = gw.get("/v1/models").get("data") or []
    collections: dict[str, dict] = {}
    for entry in listed:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        name = entry["id"].split(":", 1)[0]
        c = collections.get(name)
        if c is None:  # the collection as itself comes first; then its other modes
            together = entry.get("together") or {}
            c = collections[name] = {
                "name": name,
                "description": entry.get("description", ""),
                "tags": entry.get("tags", []),
                "members": entry.get("members", []),
                "explorers": entry.get("explorers"),
                "shape": entry.get("shape"),
                "reply": entry.get("reply"),
                "replies": [],
                "context_window": together.get("context_window"),
                "capabilities": together.get("capabilities", []),
            }
        if entry.get("reply") and entry["reply"] not in c["replies"]:
            c["replies"].append(entry["reply"])
    rows = list(collections.values())
    if not rows:
        return (
            "The gateway serves no collection yet (or none this key may call); make one "
            "with `panelist collection save NAME --members a,b,c`.",
            {"collections": []},
        )
    lines = []
    for c in rows:
        lines.append(f"{c['name']}: {c['description'] or '(no description)'}")
        extra = f" + {c['explorers']} explorer seat(s)" if c["explorers"] else ""
        others = [r for r in c["replies"] if r != c["reply"]]
        lines.append(
            f"  members {', '.join(c['members'])}{extra} · shape {c['shape']} · "
            f"reply {c['reply']}"
            + (f" (or {', '.join(others)})" if others else "")
            + (f" · tags {', '.join(c['tags'])}" if c["tags"] else "")
        )
    lines.append('\nAsk one with the ask tool: {"collection": "<name>", "prompt": "..."}')
    return "\n".join(lines), {"collections": rows}


def ask(gw: Remote, args: dict) -> tuple[str, dict]:
    if not args["prompt"].strip():
        raise ToolFailed("'prompt' is empty: give the question or task for the panel")
    name = args["collection"].strip()
    model = name if name.startswith("bench/") else f"bench/{name}"
    messages = ([{"role": "system", "content": args["system"]}] if args.get("system") else []) + [
        {"role": "user", "content": args["prompt"]}
    ]
    body = {"model": model, "messages": messages}
    if args.get("reply"):
        body["bench"] = {"reply": args["reply"]}
    reply = gw.post("/v1/chat/completions", body, timeout=ASK_TIMEOUT)
    try:
        choice = reply["choices"][0]
        bench = reply["bench"]
        seats = list(bench["seats"])
    except (KeyError, IndexError, TypeError):
        raise ToolFailed(
            f"{gw.base} answered without a panel (no choices or bench.seats); "
            "check that PANELIST_URL names a Panelist gateway"
        ) from None
    message = choice.get("message") or {}
    answer = message.get("content") or ""
    data = {"answer": answer, "finish_reason": choice.get("finish_reason")}
    if message.get("tool_calls"):
        data["tool_calls"] = message["tool_calls"]
    data.update(bench)
    text = f"{answer}\n\n---\n{seat_lines(bench)}"
    judged = seats + ([bench["merger"]] if isinstance(bench.get("merger"), dict) else [])
    if not any(s.get("status") in ("ok", "tool_calls") for s in judged):
        raise ToolFailed(
            f"no seat of {bench.get('collection', model)} answered (panel "
            f"{bench.get('panel')}); try again later, ask another collection, "
            f"or see `panelist model list` for cooling or retired models\n\n{text}",
            data,
        )
    return text, data


def seat_lines(bench: dict) -> str:
    """Who answered, under which call id: what the agent needs to judge them."""
    lines = [f"panel {bench.get('panel')} · {bench.get('collection')} · reply {bench.get('reply')}"]
    if bench.get("note"):
        lines.append(f"note: {bench['note']}")
    seats = list(bench.get("seats") or [])
    if isinstance(bench.get("merger"), dict):
        seats.append(bench["merger"])
    lines.extend(_seat_line(s) for s in seats)
    lines.append(JUDGE)
    return "\n".join(lines)


def _seat_line(s: dict) -> str:
    line = (
        f"- call {s.get('call')} · {s.get('alias')} ({s.get('seat')}) · "
        f"{s.get('status')} · {float(s.get('seconds') or 0):.2f} s"
        + (" so far" if s.get("status") == "running" else "")
    )
    return line + (f" · {s['error']}" if s.get("error") else "")


def verdict(gw: Remote, args: dict) -> tuple[str, dict]:
    result = gw.post("/bench/verdict", args)
    word = "useful" if args["useful"] else "not useful"
    if not result.get("written"):
        said = "unchanged (the same verdict was already recorded)"
    else:
        said = "replaced the earlier verdict" if result.get("replaced") else "recorded"
    return f"{said}: {args['call']} is {word}", result


def pending(gw: Remote, args: dict) -> tuple[str, dict]:
    limit = args.get("limit", 20)
    owed = gw.get("/bench/pending?" + urlencode({"limit": limit})).get("data") or []
    if not owed:
        return "No call awaits a verdict.", {"pending": []}
    lines = [f"{len(owed)} call(s) await a verdict, newest first:"]
    lines += [
        f"- call {o.get('call')} · {o.get('alias')} · {o.get('collection')} · {o.get('ts')}"
        for o in owed
    ]
    lines.append(JUDGE)
    return "\n".join(lines), {"pending": owed}


HANDLERS: dict[str, Callable[[Remote, dict], tuple[str, dict]]] = {
    "list_collections": list_collections,
    "ask": ask,
    "verdict": verdict,
    "pending": pending,
}

INSTRUCTIONS = (
    "Panelist asks several models the same prompt at once (a panel) and keeps score "
    "of whose answers helped. Use list_collections to choose a collection, ask it, "
    "check the answers against the real work, then record a verdict for each call "
    "id; pending lists the calls still owed one."
)


# -- the protocol ---------------------------------------------------------------------------------
class Server:
    """One stdio session: reads requests from ``rfile``, writes replies to ``wfile`` (both
    binary), logs to ``log`` (text)."""

    def __init__(
        self,
        gateway: Remote,
        rfile,
        wfile,
        log,
        *,
        progress_every: float = PROGRESS_EVERY,
        calls: int = MAX_CALLS,
    ):
        self.gateway = gateway
        self.rfile, self.wfile, self.log = rfile, wfile, log
        self._write_lock = threading.Lock()
        self._closed = False
        self._pool = CallPool(self._tool, self._write, workers=calls, every=progress_every)

    def serve(self) -> None:
        """Answer until stdin ends (or stdout is gone), then finish the calls under way."""
        while not self._closed:
            line = self.rfile.readline(MAX_MESSAGE + 1)
            if not line:
                break
            if len(line) > MAX_MESSAGE and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # drop the rest of it
                    line = self.rfile.readline(1024 * 1024)
                self._error(
                    None,
                    INVALID_REQUEST,
                    f"a message is at most {MAX_MESSAGE} bytes; send a shorter prompt",
                )
                continue
            if line.strip():
                self.receive(line)
        self._pool.close()

    def receive(self, line: bytes) -> None:
        try:
            msg = jsonwire.loads(line, strict=True)
        except (ValueError, UnicodeDecodeError) as exc:
            self._error(
                None,
                PARSE_ERROR,
                f"not JSON ({exc}); send one JSON-RPC 2.0 message a line, in UTF-8",
            )
            return
        if isinstance(msg, list):
            self._error(
                None, INVALID_REQUEST, "batches are not taken; send one JSON-RPC message a line"
            )
            return
        rid = msg.get("id") if isinstance(msg, dict) else None
        good_id = is_id(rid)
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self._error(
                rid if good_id else None,
                INVALID_REQUEST,
                'not a JSON-RPC 2.0 message: send an object with "jsonrpc": "2.0"',
            )
            return
        method = msg.get("method")
        if method is None and "id" in msg and ("result" in msg or "error" in msg):
            return  # a reply to a request of ours; this server sends none
        if not isinstance(method, str):
            self._error(
                rid if good_id else None,
                INVALID_REQUEST,
                "a request needs a 'method' (text) and an 'id' (text or a number)",
            )
            return
        if "id" in msg and not good_id:
            self._error(
                None,
                INVALID_REQUEST,
                f"'id' must be text or a finite number (an integer is best), not {_kind(rid)}",
            )
            return
        params = msg.get("params")
        if "id" not in msg:
            return  # a notification: initialized, cancelled, … none of them needs an answer
        try:
            if params is not None and not isinstance(params, dict):
                raise ProtocolError(INVALID_PARAMS, f"'params' of {method} must be an object")
            if method == "tools/call":
                self._pool.submit(Call(rid, *self._tool_call(params or {}), size=len(line)))
                return
            self._reply(rid, self.dispatch(method, params or {}))
        except ProtocolError as exc:
            self._error(rid, exc.code, exc.message)
        except Busy as exc:
            self._error(rid, BUSY, str(exc))
        except Exception as exc:  # a bug here must not cost the session or go unanswered
            self._write(self._internal(rid, method, exc))

    def dispatch(self, method: str, params: dict) -> dict:
        if method == "initialize":
            asked = params.get("protocolVersion")
            if not isinstance(asked, str):
                raise ProtocolError(
                    INVALID_PARAMS,
                    "initialize needs 'protocolVersion', the "
                    "revision of the protocol the client speaks",
                )
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "panelist", "title": "Panelist", "version": __version__},
                "instructions": INSTRUCTIONS,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": TOOLS}
        raise ProtocolError(
            METHOD_NOT_FOUND,
            f"no method '{method[:100]}' here; this server "
            "answers initialize, ping, tools/list and tools/call",
        )

    def _tool_call(self, params: dict) -> tuple[str, dict, str | int | None]:
        """The tool's name, its arguments and the client's progress token, if it gave one."""
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(
                INVALID_PARAMS, "tools/call needs 'name', one of " + ", ".join(TOOL_NAMES)
            )
        if name not in HANDLERS:
            raise ProtocolError(
                INVALID_PARAMS,
                f"unknown tool '{name[:100]}'; the tools are " + ", ".join(TOOL_NAMES),
            )
        args = params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ProtocolError(INVALID_PARAMS, f"'arguments' of {name} must be an object")
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(token, bool) or not isinstance(token, (str, int)):
            token = None
        return name, args, token

    def _tool(self, call: Call) -> dict:
        """The reply to one tools/call: its result, or an internal error (never raises)."""
        rid, name, args = call.rid, call.name, call.args
        schema = next(t["inputSchema"] for t in TOOLS if t["name"] == name)
        try:
            text, data = HANDLERS[name](self.gateway, check_arguments(schema, args))
            result = {
                "content": [{"type": "text", "text": text}],
                "structuredContent": data,
                "isError": False,
            }
            self._say(f"{name}: done")
        except ToolFailed as exc:
            result = self._failed(name, exc.message, exc.data)
        except PanelistError as exc:  # the gateway's refusal, or no gateway: remote says which
            seats = exc.details.get("seats")
            text = exc.message
            if isinstance(seats, list) and seats:  # a panel ran and every seat failed
                text += "\n\n" + "\n".join(_seat_line(s) for s in seats if isinstance(s, dict))
            result = self._failed(name, text, body_of(exc))
        except Exception as exc:
            return self._internal(rid, f"tools/call {name}", exc)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _failed(self, name: str, text: str, data: dict | None) -> dict:
        self._say(f"{name}: {text.splitlines()[0]}")
        result = {"content": [{"type": "text", "text": text}], "isError": True}
        if data is not None:
            result["structuredContent"] = data
        return result

    # -- writing ----------------------------------------------------------------------------------
    def _reply(self, rid, result: dict) -> None:
        self._write({"jsonrpc": "2.0", "id": rid, "result": result})

    def _error(self, rid, code: int, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def _internal(self, rid, what: str, exc: Exception) -> dict:
        """Log the traceback; return the error reply for it."""
        self._say(
            f"internal error in {what}:\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        )
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {
                "code": INTERNAL_ERROR,
                "message": f"internal error in {what}: "
                f"{type(exc).__name__}; the server's stderr has the traceback: "
                "please report it",
            },
        }

    def _write(self, message: dict) -> None:
        try:  # allow_nan=False: Python would write NaN or Infinity, which no peer can read
            data = jsonwire.encode(message, allow_nan=False) + b"\n"
        except ValueError as exc:  # a number JSON cannot carry, e.g. in a gateway's reply
            if "id" not in message:
                self._say(f"dropped a notification JSON cannot carry: {exc}")
                return
            data = jsonwire.encode(self._internal(message["id"], "writing the reply", exc)) + b"\n"
        with self._write_lock:
            if self._closed:
                return
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except (OSError, ValueError):  # the client is gone: nobody to answer any more
                self._closed = True

    def _say(self, text: str) -> None:
        try:
            print(f"panelist mcp: {text}", file=self.log, flush=True)
        except (OSError, ValueError):
            pass


def is_id(value) -> bool:
    """Whether ``value`` can be a request's id: text or a finite number (JSON-RPC 2.0).
    ``1e400`` is valid JSON but parses to infinity, which no reply could carry back."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value))


def _kind(value) -> str:
    if isinstance(value, float):
        return "a number too large for JSON-RPC (it overflows to infinity)"
    return {type(None): "null", bool: "true or false", dict: "an object", list: "a list"}.get(
        type(value), "that"
    )


def connect(url: str | None = None, env=None) -> Remote:
    """The gateway this server calls: ``url``, else PANELIST_URL, else the default; its key
    from ``env`` (default: the process environment)."""
    env = os.environ if env is None else env
    return remote.connect(url or env.get(URL_VARIABLE) or DEFAULT_URL, remote.MCP, env)


def main(url: str | None = None, env=None, calls: int = MAX_CALLS) -> int:
    """Serve one session on this process's stdin and stdout."""
    gateway = connect(url, env)
    rfile, wfile = sys.stdin.buffer, sys.stdout.buffer
    server = Server(gateway, rfile, wfile, sys.stderr, calls=calls)
    server._say(
        f"{__version__} serving tools over stdio for the gateway at {gateway.base}"
        + (" (with a gateway key)" if gateway.keyed else "")
    )
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # a stray print must not break the wire
    try:
        server.serve()
    finally:
        sys.stdout = real_stdout
    return 0


# -- the command -------------------------------------------------------------------------------
def register(nouns, common) -> None:
    m = nouns.add_parser(
        "mcp",
        help="serve the Model Context Protocol on stdin/stdout, so an "
        "agent can ask a running gateway's panels and judge their answers",
    )
    m.add_argument(
        "--url",
        metavar="URL",
        help="the running gateway (default: $PANELIST_URL, "
        "else http://127.0.0.1:8123); its key, if it needs one, from $PANELIST_KEY",
    )
    m.add_argument(
        "--calls",
        metavar="N",
        type=_calls,
        default=MAX_CALLS,
        help=f"tool calls run at once (default {MAX_CALLS}, at most {CALLS_LIMIT}); "
        f"up to {MAX_WAITING} more wait their turn, and a call past those is told "
        "to retry",
    )


def _calls(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= CALLS_LIMIT:
        raise argparse.ArgumentTypeError(
            f"give a whole number from 1 to {CALLS_LIMIT}, not '{text[:20]}'"
        )
    return n


def cmd_mcp(args, out) -> int:
    # stdout becomes the protocol's: nothing else prints there
    return main(url=args.url, calls=args.calls)


COMMANDS = {"mcp": cmd_mcp}
