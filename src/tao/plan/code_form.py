"""Plans written as straight-line Python: each assignment is a step, the names are the edges.

A small model reasons far better in commented code than in a JSON plan (the 1.5B: CodeAct 39/40
on the package's calculator problems, the JSON planner 27/40). LLMCompiler plans in a call-like
language for the same reason. So the planner may write::

    # books sold in the afternoon: three times the morning
    afternoon = 18 * 3
    total_books = 18 + afternoon
    takings = total_books * 25
    final_answer(f"The shop takes in {takings} dollars")

and this module reads it into the same ``Plan`` of ``Step``s the executor runs: ``afternoon`` is a
``calculate`` step, ``total_books`` one that depends on it, the answer a template. Nothing of the
code is executed here; it is read with ``ast`` and every step still runs as a tool call, retried,
re-planned and audited like a JSON plan's.

- ``name = tool(...)``: a step of that tool; positional arguments in the tool's parameter order.
- ``name = <arithmetic>``: a ``calculate`` step (names of earlier steps become ``$stepN``); with
  only ``calculator``, a single ``a <op> b`` becomes its operation.
- ``name = 25`` (a bare literal): no step; later uses of the name read 25.
- ``final_answer(x)`` / ``final_answer(f"... {x} ...")``: the plan's answer (without one, the
  last step is the answer and the plan may be reviewed).
- Loops, ``if``, ``def``: refused with the line, since a plan is a graph written before anything
  runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from ..tools.base import Toolbox
from ..tools.calculator import _CONSTANTS, _FUNCS
from .references import references
from .schema import Plan, PlanInvalid, Step
from .validate import check

_FENCE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.List, ast.Tuple,
               ast.IfExp, ast.Compare, ast.BoolOp, ast.operator, ast.unaryop, ast.cmpop,
               ast.boolop, ast.Load)
_OPERATIONS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}
ANSWER_CALLS = ("final_answer", "print")
_BRACES = re.compile(r"\$\{(step\d+)\}(?!\w)")


def code_of(text: str) -> str:
    """The plan's code: the last fenced block of the reply, or the whole reply."""
    blocks = _FENCE.findall(text)
    return (blocks[-1] if blocks else text).strip("\n")


class _Reader:
    def __init__(self, toolbox: Toolbox, finished: Mapping[str, Any], first: int,
                 names: Mapping[str, str]):
        self.toolbox = toolbox
        self.first = first
        #: a name -> "$stepN" (a step's result) or a literal's source; an earlier plan's names
        #: stand where their steps finished
        self.names: dict[str, str] = {k: v for k, v in names.items()
                                      if not v.startswith("$") or v[1:] in finished}
        self.names.update({s: f"${s}" for s in finished})
        self.steps: list[Step] = []
        self.bound: dict[str, str] = {}  # what this plan named, as ``names``
        self.answer: str | None = None
        self.errors: list[str] = []
        self.comments: dict[int, str] = {}

    # -- the statements ---------------------------------------------------------------------
    def read(self, code: str) -> None:
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            where = f"line {e.lineno}: " if e.lineno else ""
            raise PlanInvalid(f"- {where}the plan is not valid Python ({e.msg})") from None
        except (ValueError, UnicodeError) as e:  # a NUL byte, a lone surrogate
            raise PlanInvalid(f"- the plan cannot be read as Python text ({e})") from None
        self.comments = _comments(code)
        for node in tree.body:
            try:
                self.statement(node)
            except PlanInvalid as e:
                self.errors.append(f"line {node.lineno}: {e}")

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring or a stray literal
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and _name(node.value.func) in ANSWER_CALLS:
            self.final(node.value, node.lineno)
            return
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
            self.assign(node.target.id, ast.copy_location(value, node), node.lineno)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and node.value is not None:
                self.assign(targets[0].id, node.value, node.lineno)
                return
            raise PlanInvalid("assign each step to one name (`name = ...`)")
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.add(None, node.value, node.lineno)  # a tool called for its effect
            return
        if isinstance(node, ast.If):  # each name it sets: one step, `a if test else b`
            for name, conditional in _branches(node, {}).items():
                self.assign(name, ast.copy_location(conditional, node), node.lineno)
            return
        kind = type(node).__name__.lower()
        raise PlanInvalid(f"a plan is a list of steps, one assignment each; `{kind}` cannot be a "
                          f"step. Write each step as `name = expression` or `name = tool(...)`")

    def assign(self, name: str, value: ast.expr, line: int) -> None:
        if _literal(value):  # a number of the task, or a list of them: no step
            self.names[name] = ast.unparse(value)
        elif isinstance(value, ast.Name):  # another name for the same result: no step
            self.names[name] = self.ref(value.id)
        else:
            self.names[name] = f"${self.add(name, value, line)}"
        self.bound[name] = self.names[name]

    def final(self, call: ast.Call, line: int) -> None:
        if len(call.args) != 1 or call.keywords:
            raise PlanInvalid("final_answer takes one value: a name, or an f-string with names")
        value = call.args[0]
        if isinstance(value, ast.JoinedStr):
            self.answer = "".join(self.text_part(p) for p in value.values)
        elif isinstance(value, ast.Constant) and isinstance(value.value, str):
            self.answer = value.value
        elif isinstance(value, ast.Name):
            self.answer = self.ref(value.id)
        else:
            self.answer = f"${self.add(None, value, line)}"

    def text_part(self, part: ast.expr) -> str:
        if isinstance(part, ast.Constant):
            return str(part.value)
        assert isinstance(part, ast.FormattedValue)
        if isinstance(part.value, ast.Name):
            ref = self.ref(part.value.id)
            return "${" + ref[1:] + "}" if ref.startswith("$") else ref
        return "${" + self.add(None, part.value, part.lineno) + "}"

    # -- steps ---------------------------------------------------------------------------------
    def add(self, name: str | None, value: ast.expr, line: int) -> str:
        func = _name(value.func) if isinstance(value, ast.Call) else None
        if func is not None and func in self.toolbox.names:
            tool, args = func, self.call_args(func, value)  # type: ignore[arg-type]
        else:
            tool, args = self.arithmetic(value)
        step_id = f"step{self.first + len(self.steps)}"  # after the steps its arguments added
        ours = {s.id for s in self.steps}
        description = self.comments.get(line) or (name or "").replace("_", " ")
        self.steps.append(Step(step_id, description or ast.unparse(value), tool, args,
                               depends_on=tuple(sorted((r for r in references(args) if r in ours),
                                                         key=lambda r: int(r[4:])))))
        return step_id

    def call_args(self, func: str, call: ast.Call) -> dict[str, Any]:
        params = list(self.toolbox[func].spec.parameters.get("properties", {}))
        if len(call.args) > len(params):
            raise PlanInvalid(f"{func} takes {len(params)} argument(s): {', '.join(params)}")
        args = {p: self.value(a) for p, a in zip(params, call.args)}
        for kw in call.keywords:
            if kw.arg is None:
                raise PlanInvalid(f"name each argument of {func} (no **)")
            args[kw.arg] = self.value(kw.value)
        return args

    def value(self, node: ast.expr) -> Any:
        """A tool argument: a literal, a name (the step's result itself), an f-string."""
        if isinstance(node, ast.Name):
            return self.ref(node.id)
        if isinstance(node, ast.JoinedStr):
            return "".join(self.text_part(p) for p in node.values)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            if not all(isinstance(k, ast.Constant) for k in node.keys):
                raise PlanInvalid(f"write each key of `{ast.unparse(node)}` out as text")
            return {k.value: self.value(v)  # type: ignore[union-attr]
                    for k, v in zip(node.keys, node.values)}
        try:
            return ast.literal_eval(node)
        except ValueError:
            return self.ref_expression(node)

    def ref_expression(self, node: ast.expr) -> str:
        """An argument computed from other values: a step of its own before this one."""
        return f"${self.add(None, node, node.lineno)}"

    def arithmetic(self, node: ast.expr) -> tuple[str, dict[str, Any]]:
        for sub in ast.walk(node):
            if not isinstance(sub, _ARITHMETIC) or isinstance(sub, ast.Call) and (
                    _name(sub.func) not in (*_FUNCS, "range") or sub.keywords):
                what = ast.unparse(sub) if isinstance(sub, ast.expr) else type(sub).__name__
                raise PlanInvalid(f"`{what}` is neither arithmetic nor a call of one of the tools")
            if isinstance(sub, ast.Constant) and type(sub.value) not in (int, float):
                raise PlanInvalid(f"`{ast.unparse(sub)}` in `{ast.unparse(node)}` is not a number: "
                                  f"write out the whole calculation")
        tools = self.toolbox.names
        if "calculate" in tools:
            return "calculate", {"expression": _Substitute(self).text(node)}
        if "calculator" in tools and isinstance(node, ast.BinOp) and type(node.op) in _OPERATIONS:
            return "calculator", {"operation": _OPERATIONS[type(node.op)],
                                  "a": self.value(node.left), "b": self.value(node.right)}
        raise PlanInvalid(f"`{ast.unparse(node)}` needs a tool to compute it; call one of the tools")

    def ref(self, name: str) -> str:
        if name not in self.names:
            raise PlanInvalid(f"`{name}` is used before a step computes it")
        return self.names[name]


class _Substitute(ast.NodeTransformer):
    """The expression as text, each name replaced by its step's ``$stepN`` or its literal."""

    def __init__(self, reader: _Reader):
        self.reader = reader

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.args = [self.visit(a) for a in node.args]
        return node  # the function's own name stays

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _CONSTANTS and node.id not in self.reader.names:
            return node  # pi, e
        return ast.Name(self.reader.ref(node.id), ast.Load())

    def text(self, node: ast.expr) -> str:
        return ast.unparse(self.visit(ast.parse(ast.unparse(node), mode="eval").body))


def _literal(node: ast.expr) -> bool:
    """A number or a list of numbers, written out."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    numbers = value if isinstance(value, (list, tuple)) else [value]
    return all(type(v) in (int, float) for v in numbers)


def _branches(node: ast.If, env: dict[str, ast.expr]) -> dict[str, ast.expr]:
    """What an ``if`` sets, each name as one conditional expression (``elif`` nests):
    ``if left % 18: boxes += 1`` is ``boxes = boxes + 1 if left % 18 else boxes``."""
    test = _Inline(env).visit(node.test)
    body = _sequence(node.body, dict(env))
    orelse = _sequence(node.orelse, dict(env))
    for name in {**body, **orelse}:
        current = env.get(name, ast.Name(name, ast.Load()))
        env[name] = ast.IfExp(test, body.get(name, current), orelse.get(name, current))
    return {name: env[name] for name in {**body, **orelse}}


def _sequence(statements: list[ast.stmt], env: dict[str, ast.expr]) -> dict[str, ast.expr]:
    set_here: dict[str, ast.expr] = {}
    for st in statements:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            name, value = st.targets[0].id, _Inline(env).visit(st.value)
        elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            name = st.target.id
            value = ast.BinOp(env.get(name, ast.Name(name, ast.Load())), st.op,
                              _Inline(env).visit(st.value))
        elif isinstance(st, ast.If):
            set_here.update(_branches(st, env))
            continue
        elif isinstance(st, ast.Pass):
            continue
        else:
            raise PlanInvalid("inside an `if` only `name = expression` can stand; write the "
                              "rest as steps of their own")
        env[name] = set_here[name] = value
    return set_here


class _Inline(ast.NodeTransformer):
    """Names set earlier in the same ``if`` replaced by what they were set to."""

    def __init__(self, env: dict[str, ast.expr]):
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.env.get(node.id, node)


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else None


def _comments(code: str) -> dict[int, str]:
    """Line -> the comment that describes the statement there: its own trailing comment, or the
    comment lines right above it."""
    found: dict[int, str] = {}
    above: list[str] = []
    for number, line in enumerate(code.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        code_part, hash_, trailing = line.partition("  #")
        if hash_ and trailing.strip():
            found[number] = trailing.strip()
        elif above and stripped:
            found[number] = " ".join(above)
        if stripped:
            above = []
    return found


def parse_code_plan(text: str, toolbox: Toolbox, *, finished: Mapping[str, Any] | None = None,
                    first: int = 1, names: Mapping[str, str] | None = None,
                    agent_steps: bool = False) -> tuple[Plan, dict[str, str]]:
    """The plan in a reply written as code, and the names it bound (name -> ``$stepN`` or a
    number's source), for the next plan of the run: a re-plan may use ``price`` and ``books``
    as the plan before named them. ``PlanInvalid`` lists every problem, each with its line."""
    finished = finished or {}
    reader = _Reader(toolbox, finished, first, names or {})
    try:
        reader.read(code_of(text))
    except RecursionError:  # a chain of thousands of `+` is that deep in ast's walks
        raise PlanInvalid("- the plan is nested too deeply to read; write shorter steps") from None
    if not reader.steps and not reader.errors and not finished:
        reader.errors.append("the plan has no steps: compute each quantity with a step "
                             "(`name = expression`), never in your head")
    errors = reader.errors or check(reader.steps, toolbox, agent_steps=agent_steps,
                                    finished=finished)
    if errors:
        raise PlanInvalid("\n".join(f"- {e}" for e in errors))
    answer, given = reader.answer, reader.answer is not None
    if answer is not None:  # ${step3} where braces are not needed reads as $step3
        answer = _BRACES.sub(r"$\1", answer)
    if answer is None and reader.steps:
        answer = f"${reader.steps[-1].id}"
    return Plan(reader.steps, answer, given), reader.bound
