"""The documentation fits the code and the repository.

- docs/configuration.md is what scripts/gen_config_reference.py writes from the schema and the YAML tree;
- README.md stays short (at most 200 lines) and links every page in docs/;
- every relative link in README.md and docs/ points to a file (and heading) that exists;
- no file of the repository refers to documents outside it (a sibling folder, a design document,
  an issue number of some tracker): a reader of this repository cannot follow such a reference.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GENERATOR = ROOT / "scripts" / "gen_config_reference.py"
METRICS_GENERATOR = ROOT / "scripts" / "gen_metrics_reference.py"
MAX_README_LINES = 200

TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".toml"}
TEXT_NAMES = {"Makefile"}
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".benchmarks", "results", "report",
             "outputs", "multirun", "build", "dist", ".cache", ".whl"}  # fmt: skip
# References to documents outside the repository. Written so that this file does not match itself.
EXTERNAL_REFERENCES = [
    ("a sibling folder outside the repository", re.compile(r"\.\./shared")),
    ("a design document", re.compile(r"\bDESIGN\.md\b")),
    ("a section of a design document", re.compile(r"\bDESIGN\s+section\b")),
    ("an issue number", re.compile(r"\bissue\s+#?\d+\b", re.IGNORECASE)),
]

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")


def load_generator(path: Path = GENERATOR):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def doc_files() -> list[Path]:
    return sorted([README, *DOCS.rglob("*.md")])


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of a Markdown file outside fenced code blocks, inline code removed."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, INLINE_CODE.sub("", line)))
    return lines


def links(path: Path) -> list[tuple[int, str]]:
    return [(number, m.group(1)) for number, line in prose_lines(path) for m in LINK.finditer(line)]


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    found: list[str] = []
    for _, line in prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            count = sum(1 for a in found if a == base or re.fullmatch(re.escape(base) + r"-\d+", a))
            found.append(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def repository_text_files() -> list[Path]:
    """Tracked and new (not ignored) text files; a plain walk where git is unavailable."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        paths = [ROOT / p for p in out.stdout.split("\0") if p]
    else:
        paths = [p for p in ROOT.rglob("*") if not SKIP_DIRS & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in paths if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES))


# (a) the generated configuration reference is current


def test_the_configuration_reference_is_current():
    generator = load_generator()
    expected = generator.render()
    current = (DOCS / "configuration.md").read_text() if (DOCS / "configuration.md").exists() else ""
    assert current == expected, "docs/configuration.md is stale: run `python scripts/gen_config_reference.py`"


def test_the_metric_reference_is_current():
    expected = load_generator(METRICS_GENERATOR).render()
    current = (DOCS / "metrics.md").read_text() if (DOCS / "metrics.md").exists() else ""
    assert current == expected, "docs/metrics.md is stale: run `python scripts/gen_metrics_reference.py`"


def test_the_generator_is_deterministic_and_its_check_mode_reports_a_stale_file(tmp_path, capsys):
    generator = load_generator()
    assert generator.render() == generator.render()
    target = tmp_path / "configuration.md"
    assert generator.main(["-o", str(target)]) == 0
    assert generator.main(["--check", "-o", str(target)]) == 0
    target.write_text(target.read_text() + "hand edit\n")
    assert generator.main(["--check", "-o", str(target)]) == 1
    assert "stale" in capsys.readouterr().err


# (b) a short README that links every page


def test_the_readme_is_short():
    count = len(README.read_text().splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; at most {MAX_README_LINES}: move detail to docs/"


def test_the_readme_links_every_page_in_docs():
    linked = {
        (README.parent / unquote(target.split("#")[0])).resolve()
        for _, target in links(README)
        if is_relative(target) and target.split("#")[0]
    }
    pages = sorted(DOCS.glob("*.md"))
    assert pages, "docs/ has no pages"
    missing = [str(p.relative_to(ROOT)) for p in pages if p.resolve() not in linked]
    assert not missing, f"README.md does not link: {', '.join(missing)}"


# (c) relative links resolve


def test_every_relative_link_points_to_an_existing_file_and_heading():
    broken = []
    for path in doc_files():
        for number, target in links(path):
            if not is_relative(target):
                continue
            file_part, _, anchor = target.partition("#")
            destination = (path.parent / unquote(file_part)).resolve() if file_part else path.resolve()
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not destination.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where} (no heading '#{anchor}' in {destination.relative_to(ROOT)})")
            elif not destination.is_relative_to(ROOT):
                broken.append(f"{where} (outside the repository)")
    assert not broken, "broken links:\n" + "\n".join(broken)


# (d) nothing refers to documents outside the repository


def test_no_file_refers_to_documents_outside_the_repository():
    offending = []
    for path in repository_text_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in EXTERNAL_REFERENCES:
                if pattern.search(line):
                    offending.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()[:160]}")
    assert not offending, (
        f"{len(offending)} line(s) refer to documents outside this repository; say what is meant instead:\n"
        + "\n".join(offending)
    )


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("see " + "../" + "shared/reference/x.csv", True),
        ("Dependency direction (" + "DESIGN" + ".md section 1)", True),
        ("exit codes (" + "DESIGN" + " section 3)", True),
        ("the CI default (" + "issue" + " 5)", True),
        ("fixed in " + "Issue" + " #12", True),
        ("an issue with the 5 points", False),
        ("shared/ folder of this repository", False),
        ("the design of section 3", False),
    ],
)
def test_the_external_reference_patterns(line, flagged):
    assert any(p.search(line) for _, p in EXTERNAL_REFERENCES) is flagged
