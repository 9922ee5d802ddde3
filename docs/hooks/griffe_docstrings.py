"""A griffe extension that makes the code's docstrings render well in the reference.

The docstrings are written for ``help()`` and doctest: examples as ``>>>`` lines and
Sphinx roles (``:func:`vjp```). Markdown would show the first as nested quotes with
the lines run together, and the second as raw text. Before mkdocstrings renders a
docstring this extension

- puts each doctest block (the ``>>>``/``...`` lines and their output, up to a blank
  line) in a fenced ``pycon`` code block, and
- turns each role into a cross-reference link when its target is an object the
  reference renders (a ``::: module`` directive of ``docs/reference/*.md`` and its
  ``members`` list; objects with a docstring), else into inline code.

It is listed under ``mkdocstrings``' ``extensions`` in ``mkdocs.yml``.

>>> fence_doctests("Text.\\n\\n>>> 1 + 1\\n2\\n\\nMore.")
'Text.\\n\\n```pycon\\n>>> 1 + 1\\n2\\n```\\n\\nMore.'
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe

REFERENCE = Path(__file__).resolve().parent.parent / "reference"
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`(~?)([^`<>]+)`")
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$")
MEMBERS = re.compile(r"^\s+members:\s*\[([^\]]*)\]")


def fence_doctests(text: str) -> str:
    """``text`` with each doctest block in a fenced ``pycon`` block (not inside a fence)."""
    lines, out = text.split("\n"), []
    in_fence, block, indent = False, [], ""
    for line in lines + [""]:
        stripped = line.strip()
        if block:
            if stripped:
                block.append(line)
                continue
            out += [f"{indent}```pycon", *block, f"{indent}```"]
            block = []
        if stripped.startswith("```"):
            in_fence = not in_fence
        if not in_fence and stripped.startswith(">>>"):
            indent = line[:len(line) - len(line.lstrip())]
            block = [line]
            continue
        out.append(line)
    return "\n".join(out[:-1] if out and out[-1] == "" and not text.endswith("\n") else out)


def rendered_objects() -> dict:
    """``{module path: its rendered members, or None for all public ones}`` from the
    ``:::`` directives of the reference pages."""
    rendered: dict = {}
    for page in sorted(REFERENCE.glob("*.md")):
        current = None
        for line in page.read_text(encoding="utf-8").splitlines():
            directive = DIRECTIVE.match(line)
            if directive:
                current = directive.group(1)
                rendered.setdefault(current, None)
                continue
            members = MEMBERS.match(line)
            if members and current is not None:
                names = {m.strip().strip("'\"") for m in members.group(1).split(",") if m.strip()}
                previous = rendered.get(current)
                rendered[current] = names if previous is None else previous | names
            elif line and not line.startswith(" "):
                current = None
    return rendered


class RenderedDocstrings(griffe.Extension):
    """Fences doctest blocks and links Sphinx roles in every docstring of a loaded package."""

    def __init__(self) -> None:
        self.rendered = rendered_objects()

    def on_package(self, *, pkg, **kwargs) -> None:
        objects = list(_walk(pkg))
        # targets: what mkdocstrings renders (it skips members without a docstring)
        paths = {obj.path for obj in objects if obj.docstring is not None and obj.docstring.value}
        for obj in objects:
            docstring = obj.docstring
            if docstring is not None and docstring.value:
                docstring.value = self._links(fence_doctests(docstring.value), obj, paths)

    def _links(self, text: str, obj, paths: set) -> str:
        def replace(match: re.Match) -> str:
            short, target = match.group(1), match.group(2).strip().lstrip(".")
            shown = target.rsplit(".", 1)[-1] if short else target
            path = self._resolve(target, obj, paths)
            return f"[`{shown}`][{path}]" if path else f"`{shown}`"
        return ROLE.sub(replace, text)

    def _resolve(self, target: str, obj, paths: set) -> str | None:
        module = obj if obj.is_module else obj.module
        scopes = [obj.path, obj.parent.path if obj.parent else "", module.path]
        package = module.path.split(".")[0]
        for candidate in [target] + [f"{scope}.{target}" for scope in scopes if scope] + [
                f"{package}.{target}"]:
            if candidate in paths and self._is_rendered(candidate):
                return candidate
        return None

    def _is_rendered(self, path: str) -> bool:
        parts = path.split(".")
        if any(part.startswith("_") for part in parts):
            return False
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in self.rendered:
                members = self.rendered[module]
                rest = parts[cut:]
                return not rest or members is None or rest[0] in members
        return False


def _walk(root):
    """Every module, class, function and attribute under ``root`` (aliases skipped)."""
    pending = [root]
    while pending:
        obj = pending.pop()
        yield obj
        for member in obj.members.values():
            if not member.is_alias:
                pending.append(member)
