"""Every error the core raises is an ``AiocommitError``: the core (everything but the
Spark integration and the CLI, which speak their hosts' errors) raises no built-in
exception but the few listed here, each for its reason."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import aiocommit
from aiocommit.committers.factory import committer_name
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.errors import AiocommitError, InvalidInput, UnsupportedStore
from aiocommit.options import CommitOptions
from aiocommit.stores.local import LocalStore
from aiocommit.stores.multipart import as_multipart
from tests.helpers import parsed

SOURCE = Path(aiocommit.__file__).resolve().parent
#: packages outside the core: they raise what their hosts expect (Spark, click)
NOT_CORE = ("integrations", "cli")
#: built-in exceptions the core may raise, where, and why
ALLOWED = {
    ("__init__.py", "AttributeError"): "a module __getattr__ must raise it",
    ("__main__.py", "SystemExit"): "the command's exit status",
    ("stores/local.py", "OSError"): "renameat2's errno, translated at the store's edge",
    ("stores/local.py", "FileExistsError"): "a directory move onto an existing path, as "
    "renameat2 reports it; translated at the store's edge",
    ("committers/manifest/spill.py", "OSError"): "a local temporary file's I/O",
}


def builtin_raises(source: Path = SOURCE) -> set[tuple[str, str, int]]:
    """(module path, exception name, line) of each ``raise`` of a built-in exception."""
    found = set()
    for path in source.rglob("*.py"):
        relative = path.relative_to(source)
        if relative.parts[0] in NOT_CORE:
            continue
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if not isinstance(raised, ast.Name):
                continue
            kind = getattr(builtins, raised.id, None)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                found.add((relative.as_posix(), raised.id, node.lineno))
    return found


def test_the_core_raises_no_bare_builtin_exception() -> None:
    bare = sorted(
        f"{path}:{line}: raise {name}"
        for path, name, line in builtin_raises()
        if (path, name) not in ALLOWED
    )
    assert bare == [], "raise an aiocommit.errors class (InvalidInput for bad input): " + str(bare)


def test_the_scan_finds_bare_raises(tmp_path: Path) -> None:
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "x.py").write_text(
        "def f(x):\n    if x:\n        raise ValueError(x)\n    raise TypeError\n"
    )
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "y.py").write_text("raise ValueError('the CLI may')\n")
    assert builtin_raises(tmp_path) == {
        ("stages/x.py", "ValueError", 3),
        ("stages/x.py", "TypeError", 4),
    }


@pytest.mark.parametrize(
    "bad",
    [
        lambda: committer_name("fast"),
        lambda: S3CommitterOptions.of_kind("manifest"),
        lambda: CommitOptions.from_mapping({"aiocommit.validate_output": "maybe"}),
        lambda: CommitOptions.from_mapping({"aiocommit.concurrency": "many"}),
    ],
    ids=["committer name", "S3A kind", "boolean option", "integer option"],
)
def test_bad_input_is_invalid_input_and_still_a_value_error(bad: object) -> None:
    assert callable(bad)
    with pytest.raises(InvalidInput) as caught:
        bad()
    assert isinstance(caught.value, AiocommitError) and isinstance(caught.value, ValueError)


async def test_a_store_without_multipart_uploads_is_unsupported_and_a_type_error() -> None:
    store = LocalStore()
    with pytest.raises(UnsupportedStore, match="no multipart uploads") as caught:
        as_multipart(store)
    assert isinstance(caught.value, InvalidInput) and isinstance(caught.value, TypeError)
    await store.aclose()
