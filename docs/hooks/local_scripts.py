"""mkdocs hook: the site serves every script it needs itself, so reading it loads nothing from a CDN.

mkdocs-material draws ```` ```mermaid ```` blocks with the page's global
``mermaid`` object and, when the page defines none, loads mermaid from
unpkg.com in the reader's browser. This hook puts ``mermaid.min.js`` into the
site and loads it, before the theme's script, on the pages that have a diagram.

The file comes from the official npm package ``mermaid``, at a pinned
version, checked against the tarball's pinned SHA-512 (the ``integrity`` the
npm registry publishes). The tarball is found, in order:

1. at ``$TIDU_MERMAID_TGZ`` (for offline builds: ``npm pack mermaid@VERSION``
   elsewhere, then point this at the ``.tgz``);
2. in the cache ``build/docs-vendor/`` (``build/`` is git-ignored);
3. by running ``npm pack mermaid@VERSION`` (needs npm and its registry), then cached.

A tarball that is missing or differs from the pinned one stops the build with
a message saying what to do. Mermaid's MIT licence is served beside it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

MERMAID_VERSION = "11.17.2"
MERMAID_INTEGRITY = ("sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7L"
                     "oaRQxULMa80/qt5gHO73aCleBBg==")
TARBALL = f"mermaid-{MERMAID_VERSION}.tgz"
ASSETS = {                                   # site path -> member of the npm tarball
    "assets/javascripts/mermaid.min.js": "package/dist/mermaid.min.js",
    "assets/javascripts/mermaid.LICENSE.txt": "package/LICENSE",
}
MERMAID_JS = "assets/javascripts/mermaid.min.js"
THEME_SCRIPT = re.compile(r'<script src="[^"]*assets/javascripts/bundle\.[^"]*"')

_extracted: dict[str, Path] = {}             # site path -> file on disk, once per build


def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    tarball = _tarball(root / "build" / "docs-vendor")
    out = root / "build" / "docs-vendor" / f"mermaid-{MERMAID_VERSION}"
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:gz") as archive:
        for site_path, member in ASSETS.items():
            target = out / Path(member).name
            data = archive.extractfile(member).read()
            if not target.is_file() or target.read_bytes() != data:
                _write_atomically(target, data)
            _extracted[site_path] = target
    return config


def on_files(files, config):
    for site_path, path in _extracted.items():
        files.append(File.generated(config, site_path, abs_src_path=str(path)))
    return files


def on_post_page(output: str, page, config) -> str:
    if 'class="mermaid"' not in output:
        return output
    src = get_relative_url(MERMAID_JS, page.url)
    tag = f'<script src="{src}"></script>\n    '
    theme = THEME_SCRIPT.search(output)
    if theme is None:
        raise PluginError(f"local_scripts hook: no theme script found in {page.file.src_uri}; "
                          "the theme changed: load mermaid before it some other way")
    return output[:theme.start()] + tag + output[theme.start():]


def _tarball(cache: Path) -> Path:
    """The verified npm tarball of mermaid: from $TIDU_MERMAID_TGZ, the cache, or npm pack."""
    given = os.environ.get("TIDU_MERMAID_TGZ")
    if given:
        _verify(Path(given), "$TIDU_MERMAID_TGZ")
        return Path(given)
    cached = cache / TARBALL
    if cached.is_file():
        _verify(cached, "the cached tarball (delete it to fetch it again)")
        return cached
    npm = shutil.which("npm")
    if npm is None:
        raise PluginError(
            f"local_scripts hook: mermaid {MERMAID_VERSION} is not in {cache} and npm is not "
            f"installed. Install npm, or run `npm pack mermaid@{MERMAID_VERSION}` on a machine "
            "that has it and set TIDU_MERMAID_TGZ to the .tgz it writes.")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        result = subprocess.run([npm, "pack", f"mermaid@{MERMAID_VERSION}", "--silent",
                                 "--pack-destination", scratch],
                                cwd=scratch, capture_output=True, text=True, check=False)
        fetched = Path(scratch) / TARBALL
        if result.returncode != 0 or not fetched.is_file():
            raise PluginError(f"local_scripts hook: `npm pack mermaid@{MERMAID_VERSION}` "
                              f"failed: {result.stderr.strip() or result.stdout.strip()}")
        _verify(fetched, "the tarball npm fetched")
        os.replace(fetched, cached)
    return cached


def _verify(tarball: Path, what: str) -> None:
    if not tarball.is_file():
        raise PluginError(f"local_scripts hook: {what}, {tarball}, is not a file")
    digest = hashlib.sha512(tarball.read_bytes()).digest()
    integrity = "sha512-" + base64.b64encode(digest).decode()
    if integrity != MERMAID_INTEGRITY:
        raise PluginError(f"local_scripts hook: {what}, {tarball}, is not mermaid "
                          f"{MERMAID_VERSION} as published on npm (integrity {integrity})")


def _write_atomically(target: Path, data: bytes) -> None:
    fd, scratch = tempfile.mkstemp(dir=target.parent)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(scratch, target)
