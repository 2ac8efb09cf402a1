"""The README's first screen and the project's own design document (no build needed).

The README opens with its two commands and then a quickstart, before anything about tests; what a
maintainer needs lives in docs/testing.md; docs/design.md is in the repository, states the layer
rules tests/architecture/test_layers.py enforces, and every "DESIGN §N" of the README and docs/
points into it.
"""
from __future__ import annotations

import re
from pathlib import Path

from testlib import load_module

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DESIGN = ROOT / "docs" / "design.md"
layers = load_module(ROOT / "tests" / "architecture" / "test_layers.py", "test_layers_rules")


def test_readme_opens_with_its_two_commands_then_the_quickstart() -> None:
    text = README.read_text()
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)
    assert blocks and [line.split()[0] for line in blocks[0].splitlines()] == ["scripts/demo.sh", "scripts/test.sh"], \
        "the README's first block must stay the two commands"
    after = text[text.index(blocks[0]) + len(blocks[0]):]
    headings = re.findall(r"^## (.+)$", after, re.M)
    assert headings and headings[0] == "Quickstart", f"the first section after the two commands is {headings[:1]}"
    quick = after[after.index("## Quickstart"):]
    quick = quick[:quick.index("\n\n", quick.index("```python"))]
    for what in ("scripts/build.sh", "LD_PRELOAD=", "traintime.torch.instrument(", "torchrun", "traintime-report",
                 "With a GPU", "Without a", "docs/validation.md"):
        assert what in quick, f"the quickstart does not show {what!r}"
    assert len(quick.splitlines()) <= 24, f"the quickstart is {len(quick.splitlines())} lines: a first screen"
    # Nothing about how traintime is tested before the quickstart ends.
    before = text[:text.index(quick) + len(quick)].replace("scripts/test.sh", "")
    assert not re.search(r"\btest(s|ed|ing)?\b", before.split("## Quickstart")[1], re.I), \
        "the quickstart talks about tests"


def test_maintainer_material_lives_in_docs_testing_md() -> None:
    readme = README.read_text()
    testing = (ROOT / "docs" / "testing.md").read_text()
    for what in ("fetch-cupti-releases.py", "pyenv-constraints.txt", "NeMo 2.7 pins", "simgpu", "test_frameworks.py",
                 "test_readme_commands.py", "sanitize.sh"):
        assert what in testing, f"docs/testing.md does not say {what!r}"
    for what in ("fetch-cupti-releases.py", "pyenv-constraints.txt", "NeMo 2.7 pins", "Run by `tests/",
                 "run by `tests/", "**How it is tested.**", "sanitize.sh asan"):
        assert what not in readme, f"the README still carries maintainer material: {what!r}"


def design_layer_table(text: str) -> dict[str, set[str]]:
    """docs/design.md's "| folder | may include |" table, as folder -> folders."""
    section = text[text.index("| folder | may include |"):]
    rules: dict[str, set[str]] = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        folder, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        rules[folder.strip("`")] = set(re.findall(r"`([a-z]+)`", allowed))
    return rules


def test_design_md_states_the_layer_rules_the_layer_test_enforces() -> None:
    assert design_layer_table(DESIGN.read_text()) == layers.DOCUMENTED


def test_a_changed_layer_rule_would_be_caught() -> None:
    rule = "| `nvml` | `core`, `support` |"
    assert rule in DESIGN.read_text()  # the row the change below edits: the test must be able to fail
    text = DESIGN.read_text().replace(rule, "| `nvml` | `core` |")
    assert design_layer_table(text) != layers.DOCUMENTED


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings: lower case, punctuation dropped, spaces to '-'."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return out


def documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "sim" / "README.md",
            ROOT / "cupti" / "README.md"]


def test_every_design_reference_points_into_docs_design_md() -> None:
    design_anchors = anchors(DESIGN.read_text())
    assert {"0-paths-contract", "4-attribution-rules", "9-budgets"} <= design_anchors, design_anchors
    for doc in documents():
        text = doc.read_text()
        if doc != DESIGN:
            assert "DESIGN.md" not in text, f"{doc.relative_to(ROOT)} cites a DESIGN.md that is not in the repository"
            bare = re.findall(r"DESIGN §\d+", text)
            assert not bare, f"{doc.relative_to(ROOT)} cites {bare}: link docs/design.md instead"
        for target, anchor in re.findall(r"\]\(([^)#\s]*design\.md)#([^)\s]+)\)", text):
            assert (doc.parent / target).resolve() == DESIGN, f"{doc.relative_to(ROOT)}: {target} is not docs/design.md"
            assert anchor in design_anchors, f"{doc.relative_to(ROOT)} links design.md#{anchor}, which is no heading"


def test_paths_in_design_md_exist() -> None:
    # Source paths only: a span under one of the repository's own top-level folders (not a region
    # path such as step/forward, an include such as traintime/traintime.h, or what a build makes).
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "build"))}
    paths = [p for p in layers.named_paths(DESIGN.read_text()) if p.split("/")[0] in top]
    assert len(paths) >= 10, f"only {paths} found: the pattern no longer reads the document"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, "docs/design.md names paths that do not exist: " + ", ".join(missing)
