"""The documentation in the repository (issue 15): the HTTP guide covers every operation of
the OpenAPI document and every problem code, the OpenAPI description points to it, and every
relative link in the README and the guide reaches a file, or a heading, that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobq.api.openapi import document
from jobq.api.problems import KINDS
from tests.conftest import ROOT

GUIDE = ROOT / "openapi" / "GUIDE.md"
DOCS = [ROOT / "README.md", GUIDE]
METHODS = ("get", "put", "post", "patch", "delete")


def test_the_guide_describes_every_operation() -> None:
    text = GUIDE.read_text()
    operations = [f"{m.upper()} {path}" for path, item in document()["paths"].items() for m in item if m in METHODS]
    assert len(operations) > 20
    missing = [op for op in operations if f"`{op}`" not in text]
    assert not missing, f"openapi/GUIDE.md does not describe {missing}"


def test_the_guide_explains_every_problem_code() -> None:
    text = GUIDE.read_text()
    text = text[text.index("\n## Errors\n") : text.index("\n## Guarantees\n")]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| ([\d, ]+) \|", text, re.M))
    assert set(rows) == set(KINDS), set(rows) ^ set(KINDS)
    for code, kind in KINDS.items():  # the status each answer of the code comes with
        assert str(kind.statuses[0]) in rows[code], (code, rows[code])


def test_the_openapi_description_points_to_the_guide() -> None:
    assert "openapi/GUIDE.md" in document()["info"]["description"]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)  # code is not links
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    found = links(doc)
    assert found, doc
    broken = []
    for link in found:
        assert not re.match(r"^[a-z]+:", link), f"{doc.name} links out of the repository: {link}"
        target, _, anchor = link.partition("#")
        file = (doc.parent / target).resolve() if target else doc
        if not file.exists() or ROOT.resolve() not in file.parents:
            broken.append(link)
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(link)
    assert not broken, f"{doc.name}: {broken}"


def test_the_link_check_catches_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[ok](#top) [gone](#nowhere) [file](missing.md)\n")
    assert links(page) == ["#top", "#nowhere", "missing.md"]
    assert anchors(page) == {"top"}
    assert slug("A job's life with curl") == "a-jobs-life-with-curl"
    assert slug("Producing: idempotency, delays, priorities") == "producing-idempotency-delays-priorities"


def test_the_readme_passes_tokens_in_the_environment_not_on_command_lines() -> None:
    """A token given as `--token "$WORKER"` is in the process's command line, which `ps`
    shows to every user of the machine: the README shows JOBQ_TOKEN instead."""
    text = (ROOT / "README.md").read_text()
    on_command_lines = re.findall(r"--token\s+[\"']?\$\w+", text)
    assert not on_command_lines, on_command_lines
    assert "JOBQ_TOKEN=$WORKER jobq worker" in text
