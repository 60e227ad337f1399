"""The routes of clients that speak Ollama's API or Google's Gemini API, over the same panels.

Ollama's routes sit at the root, where its clients look (``/api/chat``, ``/api/generate``,
``/api/tags``, ``/api/show``, ``/api/version``): an Ollama client points at the server itself
(``http://host:port``), not at ``/v1``. On ``serve``'s single port the dashboard's routes live
under ``/api/`` too; none of theirs has these five names, each of these declares the gateway's
gate (keys) where the dashboard's declare the admin's, and the guard counts these five paths as
gateway paths (keys, CORS), so neither side reaches the other's. Gemini's routes are under
``/v1beta/models``, as its clients build them from a base URL of the server itself.

Thin, as ``routes`` is: each action translates its body through ``metrics.wire.ollama`` or
``metrics.wire.gemini``, runs the panel as ``/v1/chat/completions`` does (``open_panel``,
``answering``: every refusal before a seat is asked, every reply of a seated panel names it in
``X-Panelist-Panel``) and writes the reply back in its format. Errors take each format's shape
at the boundary (``wire.errors.shaped``).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from panelist.metrics.errors import BadRequest, MethodNotAllowed, NotFound
from panelist.metrics.panel import prompt
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.routes import COUNT_HEADER, answer_translated, models_of
from panelist.metrics.server.routing import KEYS, Route
from panelist.metrics.wire import gemini, models, ollama


def _entries(h: Handler) -> list[dict]:
    """Every id this caller may ask (each collection in each reply mode), as ``/v1/models``."""
    return models.models_list(*models_of(h))["data"]


def _entry(h: Handler, model_id, param: str = "model") -> dict:
    if not isinstance(model_id, str) or not model_id:
        raise BadRequest(
            "name the model: a collection such as 'bench/<name>' or 'bench/<name>:pick'",
            param=param,
        )
    mine, view, limits, states = models_of(h)
    found = models.one_model(model_id, mine, view, limits, states)
    if found is None:
        raise NotFound(
            f"no model '{model_id}' here; {models.unknown_hint(mine)}",
            param=param,
            code="model_not_found",
        )
    return found


# -- Ollama -------------------------------------------------------------------------------------
def post_ollama_chat(h: Handler, _):
    body = h.read_json()
    chat, stream = ollama.chat_to_chat(body)  # the whole body is checked, as post_chat's is
    answer_translated(
        h,
        chat,
        stream,
        lambda run: ollama.Events(body["model"]),
        lambda reply, panel: ollama.chat_reply(reply, body["model"]),
    )


def post_ollama_generate(h: Handler, _):
    body = h.read_json()
    chat, stream = ollama.generate_to_chat(body)
    answer_translated(
        h,
        chat,
        stream,
        lambda run: ollama.Events(body["model"], generate=True),
        lambda reply, panel: ollama.generate_reply(reply, body["model"]),
    )


def get_ollama_tags(h: Handler, _):
    h.send_json(200, {"models": [ollama.tag(e) for e in _entries(h)]})


def post_ollama_show(h: Handler, _):
    body = h.read_json()
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"model": "bench/<name>"}')
    name = body.get("model", body.get("name"))
    h.send_json(200, ollama.show(_entry(h, ollama.model_name(name))))


def get_ollama_version(h: Handler, _):
    h.send_json(200, {"version": ollama.API_VERSION})


# -- Gemini -------------------------------------------------------------------------------------
def get_gemini_models(h: Handler, _):
    h.send_json(200, {"models": [gemini.model_entry(e) for e in _entries(h)]})


def get_gemini_model(h: Handler, params: dict):
    model, method = gemini.split_path(params["rest"])
    if method:
        raise MethodNotAllowed(f"{method} takes POST", headers={"Allow": "POST"})
    h.send_json(200, gemini.model_entry(_entry(h, model)))


def post_gemini(h: Handler, params: dict):
    model, method = gemini.split_path(params["rest"])
    if not method:
        raise NotFound(
            f"no method on models/{model}; POST to models/{model}:generateContent, "
            ":streamGenerateContent or :countTokens"
        )
    body = h.read_json()
    if method == "countTokens":
        return _gemini_count(h, model, body)
    chat = gemini.to_chat(body, model)
    stream = method == "streamGenerateContent"
    if stream and parse_qs(urlsplit(h.path).query).get("alt") != ["sse"]:
        raise BadRequest(
            "streamGenerateContent is served as server-sent events: add ?alt=sse "
            "(Google's clients do)",
            param="alt",
        )
    answer_translated(
        h,
        chat,
        stream,
        lambda run: gemini.Events(model, run.panel),
        lambda reply, panel: gemini.from_chat(reply, model, panel),
    )


def _gemini_count(h: Handler, model: str, body) -> None:
    """``countTokens``: the estimate a panel of this request would check each seat's window
    against (``X-Panelist-Token-Count: estimate``); nothing is seated."""
    chat = gemini.to_chat(gemini.count_body(body), model)
    h.caller.check_model(model)  # 403
    h.server.panels.collections.resolve(model)  # 404: an unknown collection
    estimate = prompt.estimate_tokens(
        prompt.check_messages(chat["messages"]),
        tools=chat.get("tools"),
        response_format=chat.get("response_format"),
    )
    h.send_json(200, {"totalTokens": estimate}, {COUNT_HEADER: "estimate"})


ROUTES = (
    Route("/api/chat", {"POST": post_ollama_chat}, gate=KEYS),
    Route("/api/generate", {"POST": post_ollama_generate}, gate=KEYS),
    Route("/api/tags", {"GET": get_ollama_tags}, gate=KEYS),
    Route("/api/show", {"POST": post_ollama_show}, gate=KEYS),
    Route("/api/version", {"GET": get_ollama_version}, gate=KEYS),
    Route("/v1beta/models", {"GET": get_gemini_models}, gate=KEYS),
    # an id holds a "/" (models/bench/name:mode), and the method follows its last ":"
    Route("/v1beta/models/*", {"GET": get_gemini_model, "POST": post_gemini}, gate=KEYS),
)
ROUTES_HELP = (
    "POST /api/chat, POST /api/generate, GET /api/tags, POST /api/show (Ollama's), "
    "GET /v1beta/models, POST /v1beta/models/<model>:generateContent (Gemini's)"
)
