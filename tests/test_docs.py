"""The documentation stands on its own: it cites no document outside the repository and no
issue by number, and every relative link in README.md and docs/ leads to a file (and a
heading, when it names one) that exists."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Not the project's own text: installs, build output, caches, VCS data.
SKIPPED_DIRS = {".venv", "build", "dist", ".git", "node_modules", "__pycache__",
                ".mypy_cache", ".ruff_cache", ".pytest_cache", "mutants", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".yml", ".yaml", ".pml", ".sh", ".cfg",
                 ".ini", ".json", ".avsc", ".html", ".js", ".css", ".properties"}
# The protocol traces number the effects they count ("EFFECT #" and a number): their own
# notation, not an issue.
TRACES = ROOT / "tests" / "protocol_traces"

# Written in parts, so this file does not match its own patterns.
_DESIGN = "DES" + "IGN"
OUTSIDE_REFERENCES = {
    "a section of the old design document": re.compile(_DESIGN + r"(\.md\b| ?\u00a7)"),
    "a folder outside the repository": re.compile(r"\.\./" + "shared"),
    "an issue by number": re.compile(r"\b" + "issue" + r"s? #?\d+", re.IGNORECASE),
    "an issue as #N": re.compile(r"(?<![\w/&{}#])#\d{1,3}\b"),
}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def project_text_files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder) / name
            if (path.suffix in TEXT_SUFFIXES or name == "Makefile"
                    or path.relative_to(ROOT).parts[0] == ".ci"):
                yield path


def outside_references(path: Path, text: str) -> list[str]:
    found = []
    for line_no, line in enumerate(text.splitlines(), 1):
        for what, pattern in OUTSIDE_REFERENCES.items():
            if what == "an issue as #N" and path.is_relative_to(TRACES):
                continue
            match = pattern.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{line_no}: {what} ({match.group(0)!r})")
    return found


def test_no_file_cites_the_old_design_document_a_folder_outside_or_an_issue_number():
    """Point at docs/design.md (e.g. "docs/design.md, 'Checkpoint order'") instead, and say
    what an issue asked for rather than its number."""
    found = []
    for path in project_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += outside_references(path, text)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("line, expected", [
    ("see " + _DESIGN + " \u00a78", "a section of the old design document"),
    ("in " + _DESIGN + ".md sections 5-6", "a section of the old design document"),
    ("copied from ../" + "shared/model", "a folder outside the repository"),
    ("asked for in " + "issue" + " 11", "an issue by number"),
    ("(" + "Issue" + "s 14 and 11)", "an issue by number"),
    ("fixed in #" + "32", "an issue as #N"),
])
def test_the_check_catches_each_kind_of_reference(line: str, expected: str):
    found = outside_references(ROOT / "docs" / "example.md", line)
    assert found and expected in found[0]


@pytest.mark.parametrize("line", [
    "a PKCS#8 PEM key",
    "confluentinc/librdkafka#5456, #5511",
    'f"{receipt}#4"',
    "docs/design.md, 'Proof layers'",
])
def test_the_check_leaves_other_text_alone(line: str):
    assert outside_references(ROOT / "docs" / "example.md", line) == []


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped,
    spaces as hyphens, repeats numbered."""
    anchors: set[str] = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        anchor, n = slug, 1
        while anchor in anchors:
            anchor, n = f"{slug}-{n}", n + 1
        anchors.add(anchor)
    return anchors


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.name}: ({target})"
        if not dest.exists():
            broken.append(f"{where} names no file")
        elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
            broken.append(f"{where} names no heading of {dest.name}")
    return broken


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere():
    broken = [f"{page.parent.relative_to(ROOT)}/{line}" for page in markdown_pages()
              for line in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_link_check_sees_a_missing_file_and_a_missing_heading(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Other\n\n## The `key` rule, again\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#the-key-rule-again) [web](https://example.org/x.md)\n"
                    "[gone](missing.md) [no heading](other.md#nothing) ![img](img/x.png)\n"
                    "```\n[in code](not-checked.md)\n```\n")
    assert broken_links(page) == [
        "page.md: (missing.md) names no file",
        "page.md: (other.md#nothing) names no heading of other.md",
        "page.md: (img/x.png) names no file",
    ]


def test_the_design_states_the_processors_rebalance_protocol_as_configured():
    # The processor's default is the classic eager protocol (every rebalance revokes every
    # partition); only group_protocol=consumer moves partitions one by one.
    from ledger_stream.settings import ProcessorSettings

    text = (ROOT / "docs" / "design.md").read_text()
    restore = text.split("## Restore", 1)[1].split("\n## ", 1)[0]
    default = ProcessorSettings.model_fields["group_protocol"].default
    assert default == "classic"
    assert "`classic`" in restore and "`consumer`" in restore
    assert "Rebalancing is cooperative" not in restore
