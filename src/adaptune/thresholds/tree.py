"""Threshold trees: Futhark's ``--print-sizes`` grammar, a forest under a synthetic root, ``--tree`` printing.

A threshold line reads ``main.suff_outer_par_6 (threshold (!main.suff_outer_par_4 !main.suff_intra_par_5))``:
the threshold is compared only when every listed threshold took the given outcome (``!`` = false). The
listed dependencies are the whole ancestor path, so the *direct* parent is the deepest one. A threshold whose
dependencies are not one root-to-node chain has several direct parents; the seed could not handle that and
proposed duplicating the subtree, which ``build_forest(..., multi_parent="duplicate")`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

NULLROOT = "nullroot"
DEFAULT_THRESHOLD = 2**15  # Futhark's default threshold value

_NAME = r"[A-Za-z_][A-Za-z0-9_.']*"
_LINE = re.compile(rf"^\s*({_NAME})\s+\(\s*threshold\s+\(([^()]*)\)\s*(?:,[^()]*)?\)\s*$")
_OTHER = re.compile(rf"^\s*({_NAME})\s+\(\s*([a-z_]+)\b.*\)\s*$")
_DEP = re.compile(rf"^(!?)({_NAME})$")


class ThresholdSyntaxError(ValueError):
    """A ``--print-sizes`` line is not in the threshold grammar; the message names the line."""


class MultiParentError(ValueError):
    """A threshold has several direct parents and duplication was not asked for."""


@dataclass(frozen=True)
class ThresholdDecl:
    """One threshold and the outcomes of the thresholds it depends on (its whole ancestor path)."""

    name: str
    deps: tuple[tuple[str, bool], ...] = ()

    def line(self) -> str:
        """This declaration in Futhark's ``--print-sizes`` syntax."""
        deps = " ".join(("" if outcome else "!") + dep for dep, outcome in self.deps)
        return f"{self.name} (threshold ({deps}))"


@dataclass
class Node:
    """A tree node: a threshold reached when its parent's comparison had outcome ``outcome``."""

    name: str
    outcome: bool | None = None  # None for the synthetic root
    children: list[Node] = field(default_factory=list)

    def child_groups(self) -> tuple[list[Node], list[Node]]:
        """(children reached on true, children reached on false)."""
        return ([c for c in self.children if c.outcome], [c for c in self.children if not c.outcome])

    def walk(self) -> Iterator[Node]:
        """Pre-order over the threshold nodes below (and including, unless synthetic) this one."""
        if self.name != NULLROOT:
            yield self
        for child in self.children:
            yield from child.walk()

    def names(self) -> list[str]:
        """Threshold names in pre-order, each once (duplicated subtrees repeat names)."""
        seen: dict[str, None] = {}
        for node in self.walk():
            seen.setdefault(node.name)
        return list(seen)


def parse_print_sizes(text: str, *, strict: bool = True) -> list[ThresholdDecl]:
    """The threshold declarations of a ``--print-sizes`` (or ``--print-params``) listing.

    Lines of other size classes (``group_size``, ``tile_size``, ...) are skipped; with ``strict`` any other
    non-blank line raises ``ThresholdSyntaxError`` naming it. Text is matched, never evaluated.
    """
    decls: list[ThresholdDecl] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            if _OTHER.match(line) and "threshold" not in line:
                continue
            if strict:
                raise ThresholdSyntaxError(f"line {number}: not a threshold declaration: {raw!r}")
            continue
        name, dep_text = match.group(1), match.group(2)
        deps = []
        for token in dep_text.split():
            dep = _DEP.match(token)
            if dep is None:
                raise ThresholdSyntaxError(f"line {number}: bad dependency {token!r} in {raw!r}")
            deps.append((dep.group(2), dep.group(1) != "!"))
        if name in seen:
            raise ThresholdSyntaxError(f"line {number}: threshold {name!r} declared twice")
        if any(d == name for d, _ in deps):
            raise ThresholdSyntaxError(f"line {number}: threshold {name!r} depends on itself")
        seen.add(name)
        decls.append(ThresholdDecl(name, tuple(deps)))
    return decls


def format_print_sizes(decls: Iterable[ThresholdDecl]) -> str:
    """Declarations back in ``--print-sizes`` syntax (one per line)."""
    return "".join(d.line() + "\n" for d in decls)


def build_forest(decls: Sequence[ThresholdDecl], *, multi_parent: str = "refuse") -> Node:
    """The forest of thresholds under the synthetic ``nullroot``.

    A threshold becomes a child of node P (reached with ancestor path A) when its dependencies are exactly
    A plus P's outcome, as the seed and Futhark's own autotuner build it. ``multi_parent`` decides what
    happens to a threshold whose dependencies are not one path: ``"refuse"`` raises ``MultiParentError``;
    ``"duplicate"`` hangs a copy of its subtree under every direct parent (the deepest dependency on each
    branch), so the subtree is present wherever it can be compared.
    """
    if multi_parent not in ("refuse", "duplicate"):
        raise ValueError(f"multi_parent must be 'refuse' or 'duplicate', got {multi_parent!r}")
    by_name = {d.name: d for d in decls}
    for d in decls:
        for dep, _ in d.deps:
            if dep not in by_name:
                raise ThresholdSyntaxError(f"threshold {d.name!r} depends on undeclared {dep!r}")
            if dep == NULLROOT:
                raise ThresholdSyntaxError(f"{NULLROOT!r} is reserved for the synthetic root")
    _check_acyclic(by_name)
    root = Node(NULLROOT)
    placed: set[str] = set()

    def grow(node: Node, path: frozenset[tuple[str, bool]]) -> None:
        for d in decls:
            if d.name in {n for n, _ in path}:
                continue
            deps = frozenset(d.deps)
            if node.name == NULLROOT:
                if deps:
                    continue
                child = Node(d.name, None)
            else:
                outcome = dict(d.deps).get(node.name)
                if outcome is None or deps != path | {(node.name, outcome)}:
                    continue
                child = Node(d.name, outcome)
            node.children.append(child)
            placed.add(d.name)
            grow(child, path | ({(node.name, child.outcome)} if node.name != NULLROOT else frozenset()))

    grow(root, frozenset())
    missing = [d for d in decls if d.name not in placed]
    if missing and multi_parent == "refuse":
        d = missing[0]
        raise MultiParentError(
            f"threshold {d.name!r} depends on {', '.join(('' if o else '!') + n for n, o in d.deps)}, "
            "which is not a single ancestor path (several direct parents); "
            "pass multi_parent='duplicate' to duplicate its subtree under each parent")
    if missing:
        _duplicate(root, decls, missing)
    return root


def _check_acyclic(by_name: dict[str, ThresholdDecl]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ThresholdSyntaxError(f"dependency cycle: {' -> '.join((*stack, name))}")
        state[name] = 1
        for dep, _ in by_name[name].deps:
            visit(dep, (*stack, name))
        state[name] = 2

    for name in by_name:
        visit(name, ())


def _duplicate(root: Node, decls: Sequence[ThresholdDecl], missing: Sequence[ThresholdDecl]) -> None:
    """Hang each unplaced threshold under every copy of each of its direct parents (parents first)."""
    deps_of = {d.name: dict(d.deps) for d in decls}
    pending = list(missing)
    progress = True
    while pending and progress:
        progress = False
        for d in list(pending):
            deps = deps_of[d.name]
            # direct parents: dependencies that no other dependency lists as its own ancestor
            direct = [p for p in deps if not any(p in deps_of[q] for q in deps if q != p)]
            if any(p in {x.name for x in pending} for p in deps):
                continue
            for parent in [n for n in root.walk() if n.name in direct]:
                if not any(c.name == d.name for c in parent.children):
                    parent.children.append(Node(d.name, deps[parent.name]))
            pending.remove(d)
            progress = True
    if pending:
        raise MultiParentError(f"cannot place threshold(s) {', '.join(d.name for d in pending)}")


def render_tree(root: Node, values: dict[str, Sequence[int]] | None = None) -> str:
    """The forest as indented text (what ``--tree`` prints): ``T``/``F`` is the parent's outcome."""
    lines = [NULLROOT]

    def emit(node: Node, prefix: str, last: bool) -> None:
        branch = "`-- " if last else "|-- "
        tag = "" if node.outcome is None else ("[T] " if node.outcome else "[F] ")
        extra = ""
        if values is not None and node.name in values:
            vals = list(values[node.name])
            shown = ", ".join(str(v) for v in vals[:6]) + (", ..." if len(vals) > 6 else "")
            extra = f"  candidates ({len(vals)}): {shown}"
        lines.append(f"{prefix}{branch}{tag}{node.name}{extra}")
        for i, child in enumerate(node.children):
            emit(child, prefix + ("    " if last else "|   "), i == len(node.children) - 1)

    for i, child in enumerate(root.children):
        emit(child, "", i == len(root.children) - 1)
    return "\n".join(lines) + "\n"
