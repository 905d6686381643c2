"""One name for one thing in the pages: Hadoop's staging, partitioned and magic
committers are "the S3A committers" (not "zero-rename" nor "S3 committers")."""

from __future__ import annotations

import re

from tests.docs.conftest import DOCS, ROOT

OTHER_NAMES = re.compile(r"zero[- ]rename committer|\bS3 committers?\b", re.IGNORECASE)


def test_the_s3a_committers_have_one_name() -> None:
    pages = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {match.group(0)}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for match in OTHER_NAMES.finditer(line)
    ]
    assert found == [], "call them 'the S3A committers'"
