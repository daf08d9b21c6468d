"""The docs site builds with warnings as errors (a broken link or anchor, a page missing from the navigation,
an API name that no longer exists), and every page is reachable from its navigation."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _config() -> dict:
    # mkdocs.yml holds one python tag (the GitHub-style anchor slugs); read it as data, tags ignored
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def test_every_doc_page_is_in_the_navigation():
    pages = _nav_pages(_config()["nav"])
    on_disk = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(pages) == on_disk
    readme_links = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", (ROOT / "README.md").read_text()))
    assert readme_links <= set(on_disk), readme_links - set(on_disk)
    assert set(on_disk) - readme_links <= {"index.md"}, "every page is listed in the README's Docs section"


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None, reason="no mkdocs")
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    out = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for page in ("index.html", "your-env/index.html", "api/index.html", "results/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    # every name `import rlpilot` offers (its lazy table) has its entry, under the module that defines it
    import rlpilot

    for name in rlpilot.__all__:
        assert re.search(rf'id="rlpilot\.[\w.]*\b{name}"', api), f"rlpilot.{name} is missing from docs/api.md"
    # docstrings are Markdown here: a Sphinx role (:class:`X`) would be printed as it is typed
    leaked = re.findall(r":(?:class|func|meth|mod|data|attr):", re.sub(r"<[^>]+>", "", api))
    assert not leaked, f"raw Sphinx roles on the API page: {leaked}"
