"""Issue 37 item 10: statements of the docs that a wheel user can check."""

from __future__ import annotations

import aiocommit
from tests.docs.conftest import DOCS


def test_dir_lists_the_public_names_only() -> None:
    names = dir(aiocommit)
    for leaked in ("Any", "TYPE_CHECKING", "annotations", "importlib"):
        assert leaked not in names
    assert set(aiocommit.__all__) <= set(names)


def test_every_store_is_named_where_stores_are_listed() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "`s3://`" in index and "`gs://`" in index and "`abfss://`" in index
    started = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert "pip install 'aiocommit[s3]'" in started


def test_no_page_points_a_wheel_user_at_the_checkout_alone() -> None:
    gcs = (DOCS / "stores" / "gcs.md").read_text(encoding="utf-8")
    assert "dev extra" not in gcs and "aiocommit[testing]" in gcs
    cli = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "lives in the source checkout" not in cli
    observability = (DOCS / "observability.md").read_text(encoding="utf-8")
    assert "not part of the wheel" in observability
