"""Structured output: whether an answer is the JSON a request's ``response_format`` asked for.

A request's ``response_format`` is ``{"type": "text"}`` (nothing to check), ``{"type":
"json_object"}`` (the answer must parse as a JSON object) or ``{"type": "json_schema",
"json_schema": {"name", "schema", "strict"}}`` (it must also fit the schema). The check is the
part of JSON Schema a caller's parser relies on, not all of it: ``type`` (one or a list),
``required``, ``properties`` and ``additionalProperties`` (false, or a schema) of objects,
``items`` of arrays, ``enum`` and ``const``, ``anyOf`` / ``oneOf`` (one branch must fit) and
``allOf`` (every branch), and local ``$ref`` (``#/$defs/...``, ``#/definitions/...``), as
pydantic models produce them. Keywords beyond those (formats, lengths, patterns) are not
checked: a model's answer that breaks them still reaches the caller, whose own parser judges.

A request's format is checked before any seat is asked (``check_format``, ``check_schema``: a
keyword read here with a value of the wrong kind is a 400 naming it).

Invariants: ``problem`` never raises for any answer or schema (a malformed schema, which only a
caller that skipped the checks can hand it, is checked only as far as it makes sense); it
returns None for a fitting answer, else one short line saying where the answer fails
(``$.items[2].price: expected number, got string``), for a failover note. Its work is bounded
whatever the caller's schema: at most ``MAX_STEPS`` value-against-schema comparisons and
``MAX_DEPTH`` nested ones (a schema whose refs or branches would take more, e.g.
``{"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}``, is trusted beyond that). The answer is parsed by
``jsonwire`` (the boundary for JSON from outside).
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.store import jsonwire

KINDS = ("text", "json_object", "json_schema")
MAX_DEPTH = 64  # schema nesting followed (refs included) before the rest is taken on trust
MAX_STEPS = 50_000  # comparisons of a value with a (sub)schema, per answer checked


def wants_json(fmt) -> bool:
    """Whether ``response_format`` asks for JSON (anything but absent or ``text``)."""
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def check_format(fmt) -> None:
    """Raise ``BadRequest`` naming the field when a request's ``response_format`` cannot be
    honoured: a wrong type anywhere in it, its schema included (``check_schema``)."""
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise BadRequest(
            '\'response_format\' must be an object such as {"type": "json_object"}',
            param="response_format",
        )
    if fmt.get("type") not in KINDS:
        raise BadRequest(
            "'response_format.type' must be text, json_object or json_schema",
            param="response_format.type",
        )
    if fmt["type"] == "json_schema":
        spec = fmt.get("json_schema")
        where = "response_format.json_schema"
        if not isinstance(spec, dict):
            raise BadRequest(
                f'\'{where}\' must be an object such as {{"name": "answer", "schema": {{...}}}}',
                param=where,
            )
        for name, kind, said in (
            ("name", str, "a string"),
            ("description", str, "a string"),
            ("strict", bool, "true or false"),
        ):
            if spec.get(name) is not None and not isinstance(spec[name], kind):
                raise BadRequest(f"'{where}.{name}' must be {said}", param=f"{where}.{name}")
        if "schema" in spec:
            check_schema(spec["schema"], f"{where}.schema")


def check_schema(schema, where: str) -> None:
    """Raise ``BadRequest`` naming the keyword (``<where>.properties.n.type[1]``) when a schema
    gives a keyword this module reads a value of the wrong kind: ``type`` (a type name or a
    non-empty list of them), ``properties`` / ``$defs`` / ``definitions`` (objects of
    schemas), ``required`` (a list of strings), ``additionalProperties`` / ``items`` / ``not``
    (a schema), ``anyOf`` / ``oneOf`` / ``allOf`` (non-empty lists of schemas), ``enum`` (a
    non-empty list), ``$ref`` (a string). Keywords it does not read are left to the seats.
    Nesting deeper than ``MAX_DEPTH`` is taken on trust, as ``problem`` takes it."""
    _check_schema(schema, where, 0)


def _check_schema(schema, where: str, depth: int) -> None:
    if isinstance(schema, bool) or depth > MAX_DEPTH:
        return
    if not isinstance(schema, dict):
        raise BadRequest(
            f"'{where}' must be a JSON Schema (an object, or true / false)", param=where
        )
    kinds = schema.get("type")
    if kinds == []:  # no type at all: no answer could fit, and every seat would be paid for
        raise BadRequest(f"'{where}.type' must name at least one JSON type", param=f"{where}.type")
    if kinds is not None:
        for i, kind in enumerate(kinds if isinstance(kinds, list) else [kinds]):
            if not isinstance(kind, str) or kind not in _TYPES:
                at = f"{where}.type" + (f"[{i}]" if isinstance(kinds, list) else "")
                raise BadRequest(
                    f"'{at}' must be a JSON type name ({', '.join(_TYPES)}) or a list of them",
                    param=at,
                )
    for key in ("properties", "$defs", "definitions"):
        inner = schema.get(key)
        if inner is None:
            continue
        if not isinstance(inner, dict):
            raise BadRequest(
                f"'{where}.{key}' must be an object of schemas", param=f"{where}.{key}"
            )
        for name, sub in inner.items():
            _check_schema(sub, f"{where}.{key}.{name}", depth + 1)
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(k, str) for k in required)
    ):
        raise BadRequest(
            f"'{where}.required' must be a list of property names", param=f"{where}.required"
        )
    for key in ("additionalProperties", "not"):
        if schema.get(key) is not None:
            _check_schema(schema[key], f"{where}.{key}", depth + 1)
    items = schema.get("items")
    if isinstance(items, list):  # the older drafts' tuple form, a schema per position
        for i, sub in enumerate(items):
            _check_schema(sub, f"{where}.items[{i}]", depth + 1)
    elif items is not None:
        _check_schema(items, f"{where}.items", depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if branches is None:
            continue
        if not isinstance(branches, list) or not branches:
            raise BadRequest(
                f"'{where}.{key}' must be a non-empty list of schemas", param=f"{where}.{key}"
            )
        for i, sub in enumerate(branches):
            _check_schema(sub, f"{where}.{key}[{i}]", depth + 1)
    enum = schema.get("enum")
    if enum is not None and (not isinstance(enum, list) or not enum):
        raise BadRequest(
            f"'{where}.enum' must be a non-empty list of the values allowed", param=f"{where}.enum"
        )
    if schema.get("$ref") is not None and not isinstance(schema["$ref"], str):
        raise BadRequest(
            f"'{where}.$ref' must be a string such as \"#/$defs/Item\"", param=f"{where}.$ref"
        )


def schema_of(fmt) -> dict | bool | None:
    """The schema a json_schema format carries (None: any JSON object will do)."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if isinstance(spec, dict) and isinstance(spec.get("schema"), (dict, bool)):
            return spec["schema"]
    return None


def problem(text, fmt) -> str | None:
    """None when ``text`` is the JSON ``fmt`` asks for (or ``fmt`` asks for none), else why not."""
    if not wants_json(fmt):
        return None
    if not isinstance(text, str) or not text.strip():
        return "the answer is empty, not JSON"
    try:
        value = jsonwire.loads(text, strict=True)
    except ValueError as exc:
        return f"the answer is not valid JSON ({str(exc)[:120]})"
    schema = schema_of(fmt)
    if schema is None:
        return (
            None
            if isinstance(value, dict)
            else f"the answer is JSON {_kind(value)}, not the object JSON mode asks for"
        )
    return _fit(value, schema, _Walk(schema), "$", 0)


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _kind(value) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


class _Walk:
    """One check's root schema (for refs) and the comparisons it may still make."""

    __slots__ = ("root", "steps")

    def __init__(self, root):
        self.root, self.steps = root, MAX_STEPS


def _resolve(ref, root):
    """A local ``$ref``'s target in ``root``, or None when it cannot be followed."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _fit(value, schema, walk: _Walk, where: str, depth: int) -> str | None:
    """None when ``value`` fits ``schema``, else the first misfit found, with its path."""
    walk.steps -= 1
    if walk.steps < 0 or depth > MAX_DEPTH:
        return None  # past the bounds: taken on trust (see the module docstring)
    if schema is False:
        return f"{where}: no value is allowed here"
    if not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        target = _resolve(schema["$ref"], walk.root)
        if target is not None:
            why = _fit(value, target, walk, where, depth + 1)
            if why:
                return why
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            misses = [_fit(value, b, walk, where, depth + 1) for b in branches]
            if all(misses):
                return (
                    misses[0]
                    if len(misses) == 1
                    else f"{where}: fits none of the {len(misses)} allowed shapes ({misses[0]})"
                )
    every = schema.get("allOf")
    for branch in every if isinstance(every, list) else []:
        why = _fit(value, branch, walk, where, depth + 1)
        if why:
            return why
    if "const" in schema and value != schema["const"]:
        return f"{where}: must be {jsonwire.dumps(schema['const'])[:60]}"
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_same(value, e) for e in enum):
        return f"{where}: must be one of {jsonwire.dumps(enum)[:80]}"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list):
        known = [k for k in kinds if isinstance(k, str) and k in _TYPES]
        if known and not any(_TYPES[k](value) for k in known):
            return f"{where}: expected {' or '.join(known)}, got {_kind(value)}"
    if isinstance(value, dict):
        return _fit_object(value, schema, walk, where, depth)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, (dict, bool)):
            for i, item in enumerate(value):
                why = _fit(item, items, walk, f"{where}[{i}]", depth + 1)
                if why:
                    return why
    return None


def _fit_object(value: dict, schema: dict, walk: _Walk, where: str, depth: int) -> str | None:
    required = schema.get("required")
    if isinstance(required, list):
        missing = [k for k in required if isinstance(k, str) and k not in value]
        if missing:
            return f"{where}: missing required key{'s' if len(missing) > 1 else ''} " + ", ".join(
                missing[:5]
            )
    props = schema.get("properties")
    if not isinstance(props, dict):
        props = {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        path = f"{where}.{key}"
        if key in props:
            why = _fit(item, props[key], walk, path, depth + 1)
        elif extra is False:
            why = f"{path}: this key is not allowed by the schema"
        elif isinstance(extra, dict):
            why = _fit(item, extra, walk, path, depth + 1)
        else:
            why = None
        if why:
            return why
    return None


def _same(a, b) -> bool:
    """JSON equality: 1 and 1.0 are equal, True and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b
