"""A chat-completions body checked whole, and the panel request it becomes (``Request``).

Every wire format ends here: ``/v1/chat/completions`` sends its body as it came, Responses and
Messages the chat body they translate theirs into (``metrics.wire``), and ``panelist ask`` its
own. ``parse_request`` is the one gate before seating.

Invariants:

* Every field a panel reads, or an OpenAI request defines and a seat is sent, is checked for its
  JSON type here, before any seat (or the decider) is asked; a field of a wrong type is a
  ``BadRequest`` whose ``param`` is its path (``messages[2].tool_calls[0].function.name``). A
  body that passes can be seated, asked, recorded and answered without another type check.
* Fields OpenAI does not define pass to the seats unread, as sent: providers have their own.
* ``Request.params`` is the body without the panel's own fields (``OWN_FIELDS``).
* ``Request.model`` is the ``model`` exactly as the caller sent it (``bench/x:pick``): every
  reply names it, in every format, so a caller reads back the id it asked for.
* A request may choose its members (``members``: roster aliases the caller has checked) and its
  explorer seats (``explorers``) in place of the collection's: the collection then lends the
  panel only its name, reply mode, merger and shape, and exactly the chosen models sit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from panelist.metrics.errors import BadRequest
from panelist.metrics.panel import jsonshape, prompt
from panelist.metrics.roster.collection import AUTO, REPLIES, Collection, Collections

# Fields that describe the panel rather than the question; everything else reaches each seat.
OWN_FIELDS = ("model", "messages", "stream", "stream_options", "n", "bench", "with")
NUMBERS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
COUNTS = ("max_tokens", "max_completion_tokens", "seed", "top_logprobs")
TOOL_CHOICES = ("auto", "none", "required")
MAX_NOMINEES = 16
# fields OpenAI defines that a panel passes on unread: the JSON type each must have
PASSED = {
    "user": (str, "a string"),
    "store": (bool, "true or false"),
    "logprobs": (bool, "true or false"),
    "parallel_tool_calls": (bool, "true or false"),
    "service_tier": (str, "a string"),
    "reasoning_effort": (str, "a string"),
    "verbosity": (str, "a string"),
    "prompt_cache_key": (str, "a string"),
    "safety_identifier": (str, "a string"),
    "prediction": (dict, "an object"),
    "audio": (dict, "an object"),
    "web_search_options": (dict, "an object"),
}


@dataclass
class Request:
    collection: Collection
    reply_mode: str
    messages: list[dict]
    params: dict
    shape: str
    shape_by: str
    estimate: int
    stream: bool = False
    nominees: tuple[str, ...] = ()
    images: list[str] = field(default_factory=list)
    prefer: str | None = None  # a member alias to pick first, when it is seated (pick.py)
    # the members' ledger states for the shape as seating saw them (set by ``Panels.seat``):
    # the pick order is read from them, so picking costs no second look at the ledger
    member_states: dict = field(default_factory=dict)
    decider: dict | None = None  # an ``auto`` shape's label and the decider's call (decider.py)
    model: str = ""  # the model as the caller named it, its reply mode suffix included
    explorers: int | None = None  # explorer seats chosen by the caller (None: the collection's)

    @property
    def asked(self) -> str:
        """The model id a reply names: as the caller sent it."""
        return self.model or self.collection.model_id

    def text(self) -> str:
        """The request as it may be written down: images are placeholders."""
        return prompt.as_text(self.messages)

    @property
    def response_format(self):
        return self.params.get("response_format")

    @property
    def tools(self) -> bool:
        return bool(self.params.get("tools"))

    @property
    def needs(self) -> frozenset[str]:
        """What a model must be able to do to sit (``seating.NEEDS``): take images, call tools,
        follow a json_schema response format."""
        fmt = self.response_format
        return frozenset(
            need
            for need, wanted in (
                ("vision", bool(self.images)),
                ("tools", self.tools),
                ("structured_output", isinstance(fmt, dict) and fmt.get("type") == "json_schema"),
            )
            if wanted
        )

    @property
    def one_answer(self) -> bool:
        """Whether the caller needs one answer it can parse or act on (JSON, or tool calls),
        never a markdown panel."""
        return self.tools or jsonshape.wants_json(self.response_format)


def parse_request(
    body, collections: Collections, *, members: tuple[str, ...] = (), explorers: int | None = None
) -> Request:
    """Validate a chat-completions body; raise BadRequest / NotFound naming the field.
    ``members`` (aliases already checked against the roster) replace the collection's members
    and ``explorers`` its explorer seats, for this request only."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (an OpenAI chat completion request)")
    collection, mode = collections.resolve(body.get("model"))
    if members:
        collection = replace(collection, members=tuple(members))
    messages = prompt.check_messages(body.get("messages"))
    check_params(body)
    bench = body.get("bench") or {}
    reply_mode = bench.get("reply") or mode or collection.reply
    if reply_mode == "all" and (
        body.get("tools") or jsonshape.wants_json(body.get("response_format"))
    ):
        wanted = "tools" if body.get("tools") else "a JSON response_format"
        name = collection.model_id
        raise BadRequest(
            f"a request with {wanted} needs one answer, and {name} replies with every seat's "
            f"answer as markdown; ask for {name}:pick (one seat's answer, verbatim) or "
            f"{name}:merged (one answer merged from every seat's), or send "
            '"bench": {"reply": "pick"}',
            param="model",
            code="reply_mode_all",
        )
    nominees = body.get("with") or []
    images = prompt.image_urls(messages)
    if collection.shape and collection.shape != AUTO:
        shape, shape_by = collection.shape, "set on the collection"
    elif images:
        shape, shape_by = "vision", "the request carries images"
    else:
        shape, shape_by = "general", "default"
    return Request(
        collection=collection,
        reply_mode=reply_mode,
        messages=messages,
        params={k: v for k, v in body.items() if k not in OWN_FIELDS},
        shape=shape,
        shape_by=shape_by,
        estimate=prompt.estimate_tokens(
            messages, tools=body.get("tools"), response_format=body.get("response_format")
        ),
        stream=body.get("stream") is True,
        nominees=tuple(nominees),
        images=images,
        model=body["model"],
        explorers=explorers,
    )


def check_params(body: dict) -> None:
    """Every field of a chat body but ``model`` and ``messages``, by its JSON type."""
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false", param="stream")
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise BadRequest(
                "'stream_options' must be an object such as {\"include_usage\": true}",
                param="stream_options",
            )
        if options.get("include_usage") is not None and not isinstance(
            options["include_usage"], bool
        ):
            raise BadRequest(
                "'stream_options.include_usage' must be true or false",
                param="stream_options.include_usage",
            )
    n = body.get("n", 1)
    if n is not None and (type(n) is not int or n != 1):
        raise BadRequest("'n' must be 1: a panel already asks every seat once", param="n")
    for name in NUMBERS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise BadRequest(f"'{name}' must be a number", param=name)
    for name in COUNTS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise BadRequest(f"'{name}' must be a whole number", param=name)
    for name, (kind, said) in PASSED.items():
        if body.get(name) is not None and not isinstance(body[name], kind):
            raise BadRequest(f"'{name}' must be {said}", param=name)
    _check_stop(body.get("stop"))
    _check_logit_bias(body.get("logit_bias"))
    _check_metadata(body.get("metadata"))
    bench = body.get("bench")
    if bench is not None and not isinstance(bench, dict):
        raise BadRequest('\'bench\' must be an object such as {"reply": "merged"}', param="bench")
    if bench and bench.get("reply") is not None and bench["reply"] not in REPLIES:
        raise BadRequest("'bench.reply' must be one of " + ", ".join(REPLIES), param="bench.reply")
    jsonshape.check_format(body.get("response_format"))
    check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), body.get("tools"))
    nominees = body.get("with")
    if nominees is not None and (
        not isinstance(nominees, list)
        or len(nominees) > MAX_NOMINEES
        or not all(isinstance(a, str) for a in nominees)
    ):
        raise BadRequest(
            f"'with' must be a list of at most {MAX_NOMINEES} model aliases", param="with"
        )


def _check_stop(stop) -> None:
    if stop is None or isinstance(stop, str):
        return
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("'stop' must be a string or a list of strings", param="stop")


def _check_logit_bias(bias) -> None:
    if bias is None:
        return
    if not isinstance(bias, dict) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) for v in bias.values()
    ):
        raise BadRequest(
            "'logit_bias' must be an object of token ids and numbers, such as {\"50256\": -100}",
            param="logit_bias",
        )


def _check_metadata(metadata) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise BadRequest("'metadata' must be an object whose values are strings", param="metadata")


def check_tools(tools) -> None:
    """Chat's ``tools``: a list of ``{"type": "function", "function": {"name", ...}}``."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise BadRequest(
            '\'tools\' must be a list of tools such as {"type": "function", '
            '"function": {"name": ...}}',
            param="tools",
        )
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise BadRequest(
                f'{where} must be an object such as {{"type": "function", '
                '"function": {"name": ...}}',
                param=where,
            )
        if tool.get("type", "function") != "function":
            raise BadRequest(
                f'{where}.type must be "function": seats are asked to call '
                "functions, which the caller runs",
                param=f"{where}.type",
            )
        fn = tool.get("function")
        if not isinstance(fn, dict):
            raise BadRequest(
                f'{where}.function must be an object such as {{"name": ..., '
                '"parameters": {...}}',
                param=f"{where}.function",
            )
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BadRequest(
                f"{where}.function.name must be a non-empty string", param=f"{where}.function.name"
            )
        for name, kind, said in (
            ("description", str, "a string"),
            ("parameters", dict, "a JSON Schema object"),
            ("strict", bool, "true or false"),
        ):
            if fn.get(name) is not None and not isinstance(fn[name], kind):
                raise BadRequest(
                    f"{where}.function.{name} must be {said}", param=f"{where}.function.{name}"
                )


def _check_tool_choice(choice, tools) -> None:
    """A tool choice, and one that forces a tool call (``"required"``, a named function) only
    with a tool to call: no seat could follow it otherwise (OpenAI refuses it the same way)."""
    if choice is None or (isinstance(choice, str) and choice in TOOL_CHOICES):
        if choice == "required" and not tools:
            raise BadRequest(
                "'tool_choice' \"required\" needs 'tools' to call; send the tools "
                "or leave tool_choice out",
                param="tool_choice",
            )
        return
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names = [t["function"]["name"] for t in tools or ()]
            if not names:
                raise BadRequest(
                    f"'tool_choice' names the function {fn['name']!r} but the "
                    "request sends no 'tools'; send it in 'tools'",
                    param="tool_choice",
                )
            if fn["name"] not in names:
                raise BadRequest(
                    f"'tool_choice' names the function {fn['name']!r}, which is "
                    f"not among the tools ({', '.join(names)}); name one of them",
                    param="tool_choice.function.name",
                )
            return
        raise BadRequest(
            "'tool_choice.function' must be an object such as {\"name\": ...}",
            param="tool_choice.function",
        )
    raise BadRequest(
        "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": "
        '"function", "function": {"name": ...}}',
        param="tool_choice",
    )
