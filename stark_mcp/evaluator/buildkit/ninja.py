"""The small subset of ninja syntax torch's extension builder writes: variables, rules, builds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_VAR = re.compile(r"\$(\w+|\{\w+\})")


class NinjaFormatError(Exception):
    """The file uses syntax this reader does not know; the caller builds with ninja itself."""


@dataclass
class BuildEdge:
    outputs: list[str]
    rule: str
    inputs: list[str]


@dataclass
class NinjaFile:
    variables: dict[str, str] = field(default_factory=dict)
    rules: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[BuildEdge] = field(default_factory=list)

    def command(self, edge: BuildEdge) -> str:
        """The shell command ninja would run for ``edge``."""
        rule = self.rules.get(edge.rule)
        if rule is None or "command" not in rule:
            raise NinjaFormatError(f"no command for rule {edge.rule!r}")
        scope = dict(self.variables)
        scope["in"] = " ".join(edge.inputs)
        scope["out"] = " ".join(edge.outputs)
        return _expand(rule["command"], scope, rule)


def _expand(text: str, scope: dict[str, str], rule: dict[str, str], depth: int = 0) -> str:
    if depth > 8:
        raise NinjaFormatError("variables nest too deep")

    def sub(match: re.Match[str]) -> str:
        name = match.group(1).strip("{}")
        if name in rule and name != "command":
            return _expand(rule[name], scope, rule, depth + 1)
        return scope.get(name, "")

    return _VAR.sub(sub, text)


def _unescape_path(word: str) -> str:
    return word.replace("$ ", " ").replace("$:", ":").replace("$$", "$")


def _split_paths(text: str) -> list[str]:
    return [_unescape_path(w) for w in re.split(r"(?<!\$) +", text.strip()) if w]


def parse(text: str) -> NinjaFile:
    nf = NinjaFile()
    current_rule: dict[str, str] | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.endswith("$"):
            raise NinjaFormatError("line continuations are not supported")
        if raw.startswith((" ", "\t")):
            if current_rule is None:
                raise NinjaFormatError(f"indented line outside a rule: {raw!r}")
            key, _, value = raw.strip().partition("=")
            current_rule[key.strip()] = value.strip()
            continue
        current_rule = None
        if raw.startswith("rule "):
            current_rule = nf.rules.setdefault(raw[5:].strip(), {})
        elif raw.startswith("build "):
            head, sep, tail = raw[6:].partition(": ")
            if not sep:
                raise NinjaFormatError(f"cannot read build line {raw!r}")
            words = tail.split(" ", 1)
            if "|" in tail:
                raise NinjaFormatError("implicit or order-only dependencies are not supported")
            nf.edges.append(
                BuildEdge(
                    outputs=_split_paths(head),
                    rule=words[0],
                    inputs=_split_paths(words[1]) if len(words) > 1 else [],
                )
            )
        elif raw.startswith(("default ", "ninja_required_version")):
            continue
        elif "=" in raw:
            key, _, value = raw.partition("=")
            nf.variables[key.strip()] = value.strip()
        else:
            raise NinjaFormatError(f"cannot read line {raw!r}")
    return nf
