"""The documentation is executed, so it cannot drift from the code.

- Every ```` ```python ```` block of every page under ``docs/`` (and of
  ``README.md``) runs. The blocks of one page run in order in one namespace,
  so a later block can use names an earlier one defined; ``assert`` lines in
  the blocks check what the prose claims.
- A block opts out only with a visible ``<!-- no-run -->`` comment on the line
  before its opening fence (blank lines between are allowed). Use it for
  fragments that cannot run on their own, sparingly: the test below lists and
  limits them.
- Every page in the ``mkdocs.yml`` nav exists, every page under ``docs/`` is in
  the nav, and every relative Markdown link in the docs resolves to a file.
- When mkdocs is installed, the site builds with ``mkdocs build --strict`` and
  no page loads a script, stylesheet or font from another host (mermaid is
  served by the site itself: ``docs/hooks/local_scripts.py``).

Docstring examples run separately: ``pytest`` is configured with
``--doctest-modules`` over ``tidu`` and ``primitives`` (see ``pyproject.toml``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NO_RUN = "<!-- no-run -->"
MAX_NO_RUN = 3          # opting out is for the rare fragment, not a habit

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """``(line number, source, runs)`` of every python fenced block in ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1                                   # the closing fence
        if lang.lower() not in ("python", "py"):
            continue
        previous = start - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        runs = not (previous >= 0 and lines[previous].strip() == NO_RUN)
        blocks.append((start + 1, "\n".join(body) + "\n", runs))
    return blocks


PAGES_WITH_CODE = [p for p in pages() if python_blocks(p)]
OPTIONAL_MODULES = ("torch", "cupy", "dask", "distributed", "jax")
IMPORT = re.compile(r"^\s*(?:import|from)\s+([\w]+)", flags=re.MULTILINE)


def optional_modules_missing(page: Path) -> list[str]:
    """The optional array libraries a page's code imports that are not installed here."""
    imported = {name for _, source, runs in python_blocks(page) if runs
                for name in IMPORT.findall(source)}
    return sorted(name for name in imported & set(OPTIONAL_MODULES)
                  if importlib.util.find_spec(name) is None)


@pytest.mark.parametrize("page", PAGES_WITH_CODE,
                         ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_CODE])
def test_page_code_runs(page: Path, tmp_path, monkeypatch):
    missing = optional_modules_missing(page)
    if missing:
        pytest.skip(f"{page.name} uses {', '.join(missing)}, not installed here (an optional "
                    "extra: pip install '.[torch]', '.[dask]' or '.[cupy]')")
    monkeypatch.chdir(tmp_path)                  # blocks that write files write here
    namespace = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for line, source, runs in python_blocks(page):
        if not runs:
            continue
        # dont_inherit: the blocks run as plain Python, without this file's __future__ imports
        code = compile(source, f"{page.relative_to(ROOT)}:{line}", "exec", dont_inherit=True)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)                # noqa: S102 - executing our own docs


def test_docs_have_code_and_few_opt_outs():
    blocks = [(p, b) for p in pages() for b in python_blocks(p)]
    assert len(blocks) > 20
    skipped = [f"{p.relative_to(ROOT)}:{line}" for p, (line, _, runs) in blocks if not runs]
    assert len(skipped) <= MAX_NO_RUN, skipped


def nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r":\s*([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE)


def test_nav_pages_exist_and_cover_docs():
    listed = nav_pages()
    assert listed, "mkdocs.yml has no nav"
    missing = [p for p in listed if not (DOCS / p).is_file()]
    assert not missing, f"nav lists pages that do not exist: {missing}"
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert not on_disk - set(listed), f"pages not in the nav: {sorted(on_disk - set(listed))}"


LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_relative_links_resolve():
    broken = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)    # links inside code don't count
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue                                          # URLs and in-page anchors
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_doctests_are_collected():
    """Docstring examples run through pytest's --doctest-modules, configured for tidu and primitives."""
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "--doctest-modules" in config
    testpaths = re.search(r"testpaths\s*=\s*\[([^\]]*)\]", config).group(1)
    assert '"tidu"' in testpaths and '"primitives"' in testpaths
    assert os.path.isfile(ROOT / "tidu" / "__init__.py")


IMAGE = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")


def test_images_exist():
    """Raw <img> tags resolve (mkdocs serves a page at page/, hence one extra ../)."""
    missing = []
    for page in pages():
        for src in IMAGE.findall(page.read_text(encoding="utf-8")):
            on_disk = src[3:] if src.startswith("../") and page.name != "index.md" else src
            if not (page.parent / on_disk).is_file():
                missing.append(f"{page.relative_to(ROOT)}: {src}")
    assert not missing, missing


# --- the built site ----------------------------------------------------------------------

REMOTE = re.compile(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)=["']?(https?:)?//""",
                    re.IGNORECASE)
SCRIPT_SRC = re.compile(r"""<script\b[^>]*\bsrc=["']([^"']+)["']""", re.IGNORECASE)


def test_built_site_loads_nothing_from_other_hosts(tmp_path):
    """``mkdocs build --strict`` passes and no page loads a script, stylesheet or font from a CDN.

    mkdocs-material would fetch mermaid from unpkg.com and fonts from Google;
    docs/hooks/local_scripts.py serves mermaid from the site and mkdocs.yml
    turns the web fonts off. Pages with a diagram must load the site's own
    mermaid before the theme's script (which otherwise falls back to the CDN).
    """
    pytest.importorskip("mkdocs", reason="building the site needs mkdocs (the docs extra)")
    pytest.importorskip("material", reason="the site's theme is mkdocs-material (the docs extra)")
    site = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                            "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                           capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if build.returncode != 0 and ("npm is not installed" in build.stderr
                                  or "npm pack mermaid" in build.stderr):
        pytest.skip("mermaid cannot be fetched here (no npm or no registry): "
                    + build.stderr.strip().splitlines()[-1])
    assert build.returncode == 0, build.stderr
    warnings = [line for line in build.stderr.splitlines() if "WARNING" in line]
    assert not warnings, warnings                  # strict fails on them; -q would hide them

    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    remote = [f"{p.relative_to(site)}: {m.group(0)}" for p in pages
              for m in REMOTE.finditer(p.read_text(encoding="utf-8"))]
    assert not remote, remote
    # the theme's repository widget asks api.github.com for the repository's facts
    widgets = [p.relative_to(site) for p in pages
               if 'data-md-component="source"' in p.read_text(encoding="utf-8")]
    assert not widgets, widgets

    with_diagrams = 0
    for page in pages:
        html = page.read_text(encoding="utf-8")
        if 'class="mermaid"' not in html:
            continue
        with_diagrams += 1
        scripts = SCRIPT_SRC.findall(html)
        mermaid = [s for s in scripts if s.endswith("mermaid.min.js")]
        theme = [i for i, s in enumerate(scripts) if "/bundle." in s or s.startswith("bundle.")]
        assert mermaid, f"{page.relative_to(site)} has a diagram but does not load mermaid"
        assert scripts.index(mermaid[0]) < theme[0], f"{page.relative_to(site)}: mermaid after the theme"
        served = (page.parent / mermaid[0]).resolve()
        assert served.is_file() and served.stat().st_size > 1_000_000, served
    assert with_diagrams >= 1, "no page has a mermaid diagram: the check above checked nothing"
    assert (site / "assets" / "javascripts" / "mermaid.LICENSE.txt").is_file()


def test_reference_renders_examples_as_code_and_roles_as_links(tmp_path):
    """Docstring examples render as highlighted code (not nested quotes with the lines run
    together), and Sphinx roles as links or code, never as raw ``:func:`` text
    (docs/hooks/griffe_docstrings.py)."""
    pytest.importorskip("mkdocs", reason="building the site needs mkdocs (the docs extra)")
    pytest.importorskip("material", reason="the site's theme is mkdocs-material (the docs extra)")
    site = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-f",
                            str(ROOT / "mkdocs.yml"), "-d", str(site)],
                           capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if build.returncode != 0 and "npm" in build.stderr:
        pytest.skip("mermaid cannot be fetched here: " + build.stderr.strip().splitlines()[-1])
    assert build.returncode == 0, build.stderr
    pages = sorted((site / "reference").rglob("*.html"))
    assert pages
    examples = links = 0
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert not re.search(r":(func|class|meth|mod|data|attr|exc):`", html), page
        assert "<blockquote>" not in html, page          # a >>> line read as a quote
        examples += html.count('<span class="gp">&gt;&gt;&gt; </span>')
        links += html.count('class="autorefs autorefs-internal"')
    assert examples > 200 and links > 50, (examples, links)


def install_block(path: Path) -> str:
    """The first ``sh`` block under the page's ``## Install`` heading."""
    text = path.read_text(encoding="utf-8")
    section = text[text.index("## Install"):]
    return re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL).group(1)


def test_readme_and_getting_started_give_the_same_install_commands():
    readme, guide = install_block(ROOT / "README.md"), install_block(DOCS / "getting-started.md")
    assert readme == guide
    assert "pip install ." in readme


def test_every_extra_the_docs_name_exists():
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = config[config.index("[project.optional-dependencies]"):]
    table = table[:table.index("\n[", 1)]
    defined = set(re.findall(r"^(\w+)\s*=", table, flags=re.MULTILINE))
    named = {extra for page in pages()
             for group in re.findall(r"""pip install (?:-e )?["']?\.\[([\w,]+)\]""",
                                     page.read_text(encoding="utf-8"))
             for extra in group.split(",")}
    assert {"test", "docs", "viz"} <= named
    assert named <= defined, f"extras named in the docs but not in pyproject.toml: {named - defined}"
