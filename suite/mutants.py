"""Mutants: one realistic bug planted in a Python function by editing its source text.

A ``Mutant`` is one edit of a file's bytes at the exact position of an AST node: ``apply``
returns ``source[:start] + new + source[end:]``, so every other byte stays identical (indents,
comments, quoting, line endings). The operators are the slips people make: a comparison's
boundary (``<`` for ``<=``) or sense (``==`` for ``!=``), an off-by-one in a constant, a range
bound or a slice, two arguments of a call swapped, a call statement left out, a ``not`` dropped
or added, ``True`` for ``False``, ``and`` for ``or``, and one variable used for another of the
same kind. Each has a ``level`` of subtlety: 3 (boundaries, off-by-one, wrong variable),
2 (swapped arguments, a missing call, ``and``/``or``), 1 (the sense of a test flipped).

Invariants:

* Only the bodies of functions are mutated (never a signature, decorator, class body or module
  top level), and nothing inside an f-string, whose node positions Python does not promise.
* ``lines`` is the key: the lines, numbered in the mutated file, of the statement that changed
  (a compound statement's header only: ``if``/``while``/``for``… up to its colon). A removed
  statement leaves no line of its own, so its key is the code line just above the gap and the
  first line of the statement that now follows it in the same block (a call is removed only
  when one follows it).
* Only a removal changes the number of lines, and only by the lines the statement held; every
  other edit keeps each line where it was.
* ``check`` accepts a mutant only when the mutated file parses and its syntax tree differs from
  the original's, so no edit is a no-op; enumeration is deterministic (same source, same list).
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterator, cast

# callees whose two arguments can be swapped without any change
SYMMETRIC = frozenset({"max", "min", "print", "hypot", "gcd", "lcm", "isclose", "dist"})
# logging and printing: leaving one out, or swapping its arguments, rarely changes behaviour
QUIET = frozenset(
    {
        "print",
        "debug",
        "info",
        "warning",
        "warn",
        "error",
        "exception",
        "critical",
        "log",
        "trace",
        "pprint",
    }
)
# names people mix up; each pair is one "kind" when both are bound in the same function
TWINS = (
    ("i", "j"),
    ("j", "k"),
    ("x", "y"),
    ("a", "b"),
    ("m", "n"),
    ("start", "end"),
    ("start", "stop"),
    ("begin", "end"),
    ("lo", "hi"),
    ("low", "high"),
    ("left", "right"),
    ("first", "last"),
    ("head", "tail"),
    ("width", "height"),
    ("w", "h"),
    ("row", "col"),
    ("rows", "cols"),
    ("src", "dst"),
    ("source", "target"),
    ("old", "new"),
    ("prefix", "suffix"),
    ("lower", "upper"),
    ("minimum", "maximum"),
    ("before", "after"),
    ("key", "default"),
    ("name", "value"),
    ("offset", "length"),
    ("pos", "end"),
    ("index", "count"),
)
_COMPARE = {
    ast.Lt: ("<", "<=", 3),
    ast.LtE: ("<=", "<", 3),
    ast.Gt: (">", ">=", 3),
    ast.GtE: (">=", ">", 3),
    ast.Eq: ("==", "!=", 1),
    ast.NotEq: ("!=", "==", 1),
    ast.In: ("in", "not in", 1),
    ast.NotIn: ("not in", "in", 1),
    ast.Is: ("is", "is not", 1),
    ast.IsNot: ("is not", "is", 1),
}
_WORD = re.compile(rb"[^\s()\\]+")  # what is left of a gap between operands: the operator
_COMMENT = re.compile(rb"#[^\n]*")
_DECIMAL = re.compile(rb"[0-9]+")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Mutant:
    path: str  # the file, relative to the repository
    function: str  # its qualified name: Class.method, outer.inner
    operator: str  # compare, off_by_one, swap_args, remove_call, not, bool, and_or, wrong_var
    level: int  # subtlety, 1..3
    start: int  # byte offsets of the edit in the original file
    end: int
    new: bytes
    lines: tuple[int, ...]  # the key: faulty lines in the mutated file
    detail: str  # what changed, for the task's ``why``

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.new + source[self.end :]


@dataclass
class Function:
    """A function of a file and the mutants its body offers."""

    path: str
    name: str
    lineno: int
    end_lineno: int
    mutants: list[Mutant]


def parse(source: bytes) -> ast.Module | None:
    """The file's tree, or None when it cannot be mutated safely: not Python 3, not UTF-8
    (node columns count UTF-8 bytes), or with bare carriage returns as line ends."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    except SyntaxError:
        return None
    if encoding not in ("utf-8", "utf-8-sig") or re.search(rb"\r(?!\n)", source):
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None


def functions(path: str, source: bytes, tree: ast.Module | None = None) -> list[Function]:
    """Every function (methods and nested ones too) with its body's mutants, in file order."""
    tree = tree or parse(source)
    if tree is None:
        return []
    # where each line starts, in bytes; the parser counts line 1 from after a byte-order mark
    starts = [3 if source.startswith(codecs.BOM_UTF8) else 0] + [
        m.end() for m in re.finditer(rb"\n", source)
    ]
    out: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found = _Scan(path, name, source, starts, child).mutants()
                if found:
                    out.append(
                        Function(path, name, child.lineno, child.end_lineno or child.lineno, found)
                    )
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.stmt):
                visit(child, prefix)  # functions defined under an if / try at any level

    visit(tree, "")
    return out


def fingerprint(source: bytes) -> str | None:
    """The file's syntax tree as text (what ``check`` compares a mutant with), or None if it
    cannot be had: not parseable, or nested too deep for ``ast.dump``."""
    tree = parse(source)
    try:
        return None if tree is None else ast.dump(tree)
    except RecursionError:
        return None


def check(mutant: Mutant, source: bytes, before: str | None = None) -> bytes | None:
    """The mutated file if the mutant is sound (it parses, its tree differs and its lines
    moved only as a removal may move them), else None. ``before`` is the original's
    ``fingerprint``, when the caller has it."""
    mutated = mutant.apply(source)
    try:
        if ast.dump(ast.parse(mutated)) == (before or ast.dump(ast.parse(source))):
            return None
    except (SyntaxError, ValueError, RecursionError):
        return None
    removed = source[mutant.start : mutant.end].count(b"\n") - mutant.new.count(b"\n")
    if removed and mutant.operator != "remove_call":
        return None
    return mutated


class _Scan:
    """The mutants of one function's body."""

    def __init__(
        self,
        path: str,
        name: str,
        source: bytes,
        starts: list[int],
        func: ast.FunctionDef | ast.AsyncFunctionDef,
    ):
        self.path, self.name, self.src, self.starts, self.func = path, name, source, starts, func
        self.found: list[Mutant] = []
        self.parents: dict[int, ast.AST] = {}  # id(node) -> its parent, for the nodes walked
        self.bound = self._bound_names()

    # -- positions --------------------------------------------------------------------------

    def at(self, lineno: int, col: int) -> int:
        return self.starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        placed = cast(ast.expr, node)  # every node walked here (expr, stmt, arg) has a place
        return (
            self.at(placed.lineno, placed.col_offset),
            self.at(placed.end_lineno or placed.lineno, placed.end_col_offset or placed.col_offset),
        )

    def text(self, node: ast.AST) -> bytes:
        a, b = self.span(node)
        return self.src[a:b]

    def add(
        self,
        operator: str,
        level: int,
        start: int,
        end: int,
        new: bytes,
        lines: tuple[int, ...],
        detail: str,
    ) -> None:
        self.found.append(
            Mutant(
                self.path,
                self.name,
                operator,
                level,
                start,
                end,
                new,
                tuple(sorted(set(lines))),
                detail,
            )
        )

    # -- walking ----------------------------------------------------------------------------

    def mutants(self) -> list[Mutant]:
        self._block(self.func.body, self.func.lineno)
        return self.found

    def _block(self, body: list[ast.stmt], header_end: int) -> None:
        for i, stmt in enumerate(body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a nested function is a function of its own; a class is not ours
            owned = [
                v
                for name, value in ast.iter_fields(stmt)
                if name not in _BLOCKS and name != "decorator_list"
                for v in (value if isinstance(value, list) else [value])
                if isinstance(v, ast.AST)
            ]
            if any(
                isinstance(v, list) and v and isinstance(v[0], ast.stmt)
                for _, v in ast.iter_fields(stmt)
            ):
                ends = [
                    end
                    for o in owned
                    for n in ast.walk(o)
                    if (end := getattr(n, "end_lineno", None))
                ]
                lines = tuple(range(stmt.lineno, max([stmt.lineno, *ends]) + 1))
            else:
                lines = tuple(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            for node in owned:
                for child, parent in _walk(node, stmt, self.parents):
                    self._node(child, parent, stmt, lines)
            self._removal(body, i, header_end)
            for name in _BLOCKS:
                inner = getattr(stmt, name, None)
                if not inner:
                    continue
                for item in inner:
                    if isinstance(item, ast.ExceptHandler):
                        self._block(item.body, item.lineno)
                    elif isinstance(item, ast.match_case):
                        self._block(item.body, item.pattern.lineno)
                if isinstance(inner[0], ast.stmt):
                    self._block(inner, lines[-1])

    def _node(self, node, parent, stmt, lines) -> None:
        if isinstance(node, ast.Compare):
            self._compare(node, lines)
        elif isinstance(node, ast.BoolOp):
            self._and_or(node, lines)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._drop_not(node, lines)
        elif isinstance(node, ast.Constant):
            self._constant(node, parent, lines)
        elif isinstance(node, ast.Call):
            self._swap(node, lines)
            self._bound(node, lines)
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if isinstance(bound, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                    self._shift(bound, lines, "a slice bound")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self._wrong_var(node, parent, lines)
        if (
            isinstance(stmt, ast.If)
            and node is stmt.test
            and isinstance(node, (ast.Name, ast.Attribute, ast.Call))
        ):
            start, _ = self.span(node)
            self.add(
                "not",
                1,
                start,
                start,
                b"not ",
                lines,
                f"the test `{_s(self.text(node))}` was negated",
            )

    # -- operators --------------------------------------------------------------------------

    def _operator_between(self, left: ast.AST, right: ast.AST) -> tuple[int, int, bytes] | None:
        """The one operator word between two operands: its span and its words joined."""
        a, b = self.span(left)[1], self.span(right)[0]
        gap = _COMMENT.sub(lambda m: b" " * len(m.group(0)), self.src[a:b])
        words = list(_WORD.finditer(gap))
        if not words:
            return None
        return a + words[0].start(), a + words[-1].end(), b" ".join(w.group(0) for w in words)

    def _compare(self, node: ast.Compare, lines) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            old, new, level = _COMPARE[type(op)]
            found = self._operator_between(left, right)
            if found and found[2] == old.encode():
                self.add(
                    "compare",
                    level,
                    found[0],
                    found[1],
                    new.encode(),
                    lines,
                    f"`{old}` became `{new}`",
                )
            left = right

    def _and_or(self, node: ast.BoolOp, lines) -> None:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        for left, right in zip(node.values, node.values[1:]):
            found = self._operator_between(left, right)
            if found and found[2] == old.encode():
                self.add(
                    "and_or", 2, found[0], found[1], new.encode(), lines, f"`{old}` became `{new}`"
                )

    def _drop_not(self, node: ast.UnaryOp, lines) -> None:
        start, _ = self.span(node)
        m = re.match(rb"not[ \t]*", self.src[start:])
        if m and self.src[start + m.end() : start + m.end() + 1] not in (b"\\", b"\n", b"\r"):
            self.add(
                "not",
                1,
                start,
                start + m.end(),
                b"",
                lines,
                f"`not` was dropped from `{_s(self.text(node))}`",
            )

    def _constant(self, node: ast.Constant, parent, lines) -> None:
        value = node.value
        if isinstance(value, bool):
            if isinstance(parent, (ast.Return, ast.keyword, ast.Assign)):
                start, end = self.span(node)
                self.add(
                    "bool",
                    1,
                    start,
                    end,
                    str(not value).encode(),
                    lines,
                    f"`{value}` became `{not value}`",
                )
            return
        if type(value) is not int or not _DECIMAL.fullmatch(self.text(node)):
            return
        negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
        context = self.parents.get(id(parent)) if negated else parent
        if not _counts(node if not negated else parent, context):
            return
        start, end = self.span(node)
        for step in (-1, 1):
            n = value + step
            # `-0` or `x + 0` reads as a no-op a reviewer would spot without reading the logic
            if n < 0 or (n == 0 and (negated or isinstance(context, ast.BinOp))):
                continue
            self.add(
                "off_by_one",
                3,
                start,
                end,
                str(n).encode(),
                lines,
                f"`{'-' if negated else ''}{value}` became `{'-' if negated else ''}{n}`",
            )

    def _bound(self, call: ast.Call, lines) -> None:
        """``range(n)`` → ``range(n + 1)``: the stop bound of a range shifted by one."""
        if (
            isinstance(call.func, ast.Name)
            and call.func.id == "range"
            and 1 <= len(call.args) <= 2
            and not call.keywords
        ):
            stop = call.args[-1]
            if isinstance(stop, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                self._shift(stop, lines, "a range's stop")

    def _shift(self, node: ast.AST, lines, what: str) -> None:
        _, end = self.span(node)
        for op in (b" + 1", b" - 1"):
            self.add(
                "off_by_one",
                3,
                end,
                end,
                op,
                lines,
                f"{what} `{_s(self.text(node))}` became `{_s(self.text(node) + op)}`",
            )

    def _swap(self, call: ast.Call, lines) -> None:
        args = call.args
        if (
            len(args) < 2
            or any(isinstance(a, ast.Starred) for a in args)
            or _callee(call) in SYMMETRIC
            or _callee(call) in QUIET
        ):
            return
        for a, b in zip(args, args[1:]):
            ta, tb = self.text(a), self.text(b)
            if ta == tb:
                continue
            (s1, e1), (s2, e2) = self.span(a), self.span(b)
            self.add(
                "swap_args",
                2,
                s1,
                e2,
                tb + self.src[e1:s2] + ta,
                lines,
                f"the arguments `{_s(ta)}` and `{_s(tb)}` of "
                f"`{_callee(call) or 'the call'}` were swapped",
            )

    def _removal(self, body: list[ast.stmt], i: int, header_end: int) -> None:
        """A call statement left out, when it stands on lines of its own beside others."""
        stmt = body[i]
        # only between two statements of a block, so the gap has a line on either side
        if (
            i + 1 >= len(body)
            or not isinstance(stmt, ast.Expr)
            or not isinstance(stmt.value, ast.Call)
            or _callee(stmt.value) in QUIET
        ):
            return
        start, end = self.span(stmt)
        last = stmt.end_lineno or stmt.lineno
        line_start = self.starts[stmt.lineno - 1]
        line_end = self.starts[last] if last < len(self.starts) else len(self.src)
        if self.src[line_start:start].strip() or _COMMENT.sub(b"", self.src[end:line_end]).strip():
            return  # shares a line with other code (`a(); b()` or a `;` after it)
        gone = last - stmt.lineno + 1
        above = stmt.lineno - 1
        while above > header_end and not _code(self._line(above)):
            above -= 1
        self.add(
            "remove_call",
            2,
            line_start,
            line_end,
            b"",
            (above, body[i + 1].lineno - gone),
            f"the call `{_s(self.text(stmt.value))}` (line {stmt.lineno} of the "
            "original) was left out",
        )

    def _line(self, lineno: int) -> bytes:
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.src)
        return self.src[self.starts[lineno - 1] : end]

    def _wrong_var(self, node: ast.Name, parent, lines) -> None:
        if isinstance(parent, ast.Call) and parent.func is node:
            return
        for other in sorted(self.bound.get(node.id, {}).get("twins", ())):
            first = self.bound[other]["first"]
            if first < node.lineno:
                start, end = self.span(node)
                self.add(
                    "wrong_var",
                    3,
                    start,
                    end,
                    other.encode(),
                    lines,
                    f"`{node.id}` became `{other}`",
                )

    def _bound_names(self) -> dict[str, dict]:
        """The function's own names, each with the line it is first bound on and its twins:
        other names of the same kind (same annotation, both range loop indices, both counts
        or both in a pair people mix up)."""
        names: dict[str, dict] = {}
        kinds: dict[str, str] = {}

        def bind(name: str, line: int, kind: str | None) -> None:
            entry = names.setdefault(name, {"first": line, "twins": set()})
            entry["first"] = min(entry["first"], line)
            if kind and name not in kinds:
                kinds[name] = kind

        a = self.func.args
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            kind = "ann:" + ast.unparse(arg.annotation) if arg.annotation is not None else None
            bind(arg.arg, 0, kind)
        for node in _own_nodes(self.func):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                ranged = isinstance(node.iter, ast.Call) and _callee(node.iter) == "range"
                bind(node.target.id, node.lineno, "index" if ranged else None)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                kind = _value_kind(node.value)
                for t in targets:
                    if isinstance(t, ast.Name):
                        bind(t.id, node.lineno, kind)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bind(node.id, node.lineno, None)
        groups: dict[str, list[str]] = {}
        for name, kind in kinds.items():
            groups.setdefault(kind, []).append(name)
        for members in groups.values():
            for x in members:
                names[x]["twins"].update(m for m in members if m != x)
        for x, y in TWINS:
            if x in names and y in names:
                names[x]["twins"].add(y)
                names[y]["twins"].add(x)
        return names


def _walk(
    root: ast.AST, parent: ast.AST, parents: dict[int, ast.AST]
) -> Iterator[tuple[ast.AST, ast.AST]]:
    """``(node, parent)`` under ``root`` in source order, f-strings left out; records each
    node's parent in ``parents`` (by id). A loop, not recursion: a long chain such as
    ``a + b + ... + z`` nests as deep as it is long."""
    todo = [(root, parent)]
    while todo:
        node, parent = todo.pop()
        if isinstance(node, ast.JoinedStr):
            continue
        parents[id(node)] = parent
        yield node, parent
        todo.extend(
            (child, node)
            for child in reversed(list(ast.iter_child_nodes(node)))
            if not isinstance(child, ast.stmt)
        )


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """Every node of a function's body, nested functions and classes left out."""
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _counts(node: ast.AST, parent: ast.AST | None) -> bool:
    """Whether an integer here is a count or a bound, where one more or less is a real slip."""
    if isinstance(parent, ast.Slice):
        return node is not parent.step
    if isinstance(parent, ast.Subscript):
        return node is parent.slice
    if isinstance(parent, ast.Call):
        return _callee(parent) == "range" and node in parent.args
    if isinstance(parent, ast.BinOp):
        return isinstance(parent.op, (ast.Add, ast.Sub))
    return isinstance(parent, ast.Compare)


def _value_kind(value: ast.AST) -> str | None:
    if isinstance(value, ast.Constant) and type(value.value) in (int, float, str):
        return type(value.value).__name__
    if isinstance(value, ast.Call) and _callee(value) == "len":
        return "int"
    return None


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _code(line: bytes) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(b"#")


def _s(text: bytes, limit: int = 60) -> str:
    """Source text for a message: one line, cut short."""
    s = " ".join(text.decode("utf-8", "replace").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
