"""Find, read and fill the prompt templates.

Templates are plain files using ``string.Template`` placeholders (``$name``), because
the C++ braces in kernel examples would clash with ``str.format``. A ``PromptTemplates``
looks a name up first in its override folder (the user's ``STARK_PROMPTS_DIR``, file by
file), then in the packaged copy: ``stark_mcp/_prompts`` in an installed wheel, the
repository's top-level ``prompts/`` in an editable install. The module-level functions
use the packaged copy alone.
"""

from __future__ import annotations

import functools
import re
import string
from pathlib import Path

import stark_mcp
from stark_mcp.agents.errors import AgentError
from stark_mcp.config import VARIABLES

PROMPTS_ENV = VARIABLES["prompts_dir"]
_PACKAGE = Path(stark_mcp.__file__).resolve().parent
_TEMPLATE_NAME = re.compile(r"^[\w.-]+$")


def builtin_prompts_dir(package_dir: Path = _PACKAGE) -> Path:
    """The packaged templates: the wheel's ``_prompts`` copy, else the source checkout's ``prompts/``."""
    candidates = (package_dir / "_prompts", package_dir.parent / "prompts")
    for candidate in candidates:
        if (candidate / "system.md").is_file():
            return candidate
    raise AgentError(
        "cannot find the prompt templates: looked in "
        + " and ".join(str(c) for c in candidates)
        + f"; reinstall stark-mcp or set {PROMPTS_ENV} to a folder holding them"
    )


class PromptTemplates:
    """The packaged templates, overridden file by file by those in ``override_dir``."""

    def __init__(self, override_dir: Path | None = None) -> None:
        if override_dir is not None:
            override_dir = Path(override_dir).expanduser()
            if not override_dir.is_dir():
                raise AgentError(f"{PROMPTS_ENV}={override_dir} is not a directory")
        self.override_dir = override_dir

    def path(self, name: str) -> Path:
        """Where template ``name`` (a file name such as ``plan.md``) is read from."""
        if not _TEMPLATE_NAME.match(name) or name.startswith("."):
            raise AgentError(f"bad template name {name!r}: give a file name inside the prompts folder")
        if self.override_dir is not None and (self.override_dir / name).is_file():
            return self.override_dir / name
        path = builtin_prompts_dir() / name
        if not path.is_file():
            raise AgentError(f"no prompt template {name!r} in {path.parent}")
        return path

    def load(self, name: str) -> str:
        """The raw text of template ``name``, without a trailing newline."""
        path = self.path(name)
        try:
            return path.read_text(encoding="utf-8").rstrip("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise AgentError(f"cannot read prompt template {path}: {exc}") from None

    def fill(self, name: str, **values: str) -> str:
        """Template ``name`` with every ``$placeholder`` replaced; a missing value is an error.

        Values may hold ``$`` freely: substitution is not applied to them again.
        """
        text = self.load(name)
        try:
            return string.Template(text).substitute(values)
        except KeyError as exc:
            key = exc.args[0]
            raise AgentError(
                f"prompt template {self.path(name)} uses ${key}, which is not provided here; "
                f"available placeholders: {', '.join('$' + k for k in sorted(values)) or 'none'}"
            ) from None
        except ValueError:
            line = _bad_placeholder_line(text)
            raise AgentError(
                f"prompt template {self.path(name)} line {line}: a '$' that starts no valid "
                "placeholder; write $$ for a literal dollar sign"
            ) from None

    def placeholders(self, name: str) -> set[str]:
        """The placeholder names template ``name`` uses (for documentation and checks)."""
        found: set[str] = set()
        for match in string.Template.pattern.finditer(self.load(name)):
            key = match.group("named") or match.group("braced")
            if key:
                found.add(key)
        return found


@functools.cache
def packaged() -> PromptTemplates:
    """The packaged templates with no override."""
    return PromptTemplates()


def template_path(name: str) -> Path:
    return packaged().path(name)


def load_template(name: str) -> str:
    return packaged().load(name)


def fill(name: str, **values: str) -> str:
    return packaged().fill(name, **values)


def placeholders(name: str) -> set[str]:
    return packaged().placeholders(name)


def _bad_placeholder_line(text: str) -> int:
    for match in string.Template.pattern.finditer(text):
        if match.group("invalid") is not None:
            return text.count("\n", 0, match.start("invalid")) + 1
    return 0
