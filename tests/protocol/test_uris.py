"""Paths in manifests are in Hadoop's URI form (``Path.toUri().toString()``), both ways."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocommit.integrations.spark.paths import escape_path_name
from aiocommit.protocol.manifest import decode_manifest
from aiocommit.protocol.success import decode_success
from aiocommit.protocol.uris import UNICODE_SPACES, manifest_path, manifest_uri, plain_suffix
from aiocommit.stores.base import check_clean
from aiocommit.stores.local import LocalStore

NAMES = Path(__file__).parent.parent / "data" / "hadoop" / "names"
ROOT = "file:/path/to/dest/"

#: what Hadoop 3.5.0 wrote into a manifest for these names (tests/data/hadoop/names)
HADOOP_WROTE = {
    "part=a b/file 1.txt": "part=a%20b/file%201.txt",
    "k=a%3Ab/part-0.csv": "k=a%253Ab/part-0.csv",
    "ü/é#?+ x.txt": "ü/é%23%3F+%20x.txt",
    "p=%25/日本語 100%.txt": "p=%2525/日本語%20100%25.txt",
    "x+y=1/a+b=c.txt": "x+y=1/a+b=c.txt",
    "nb\u00a0sp/f": "nb%C2%A0sp/f",
}

#: legal in a URI path as java.net.URI writes it, or a %XX escape, or non-ASCII
_URI_PATH = re.compile(r"(?:[A-Za-z0-9\-_.!~*'():@&=+$,;/]|%[0-9A-F]{2}|[^\x00-\x7f])*")


@pytest.mark.parametrize(("name", "uri"), sorted(HADOOP_WROTE.items()))
def test_same_uri_as_hadoop(name: str, uri: str) -> None:
    assert manifest_uri(ROOT + name) == ROOT + uri
    assert manifest_path(ROOT + uri) == ROOT + name


def test_hadoop_samples_decode_to_the_names_it_was_given() -> None:
    manifest = decode_manifest((NAMES / "task-manifest.json").read_bytes())
    attempt = manifest.task_attempt_dir.removeprefix("file:")
    store = LocalStore()
    dests = {store.unqualify(manifest_path(entry.dest)) for entry in manifest.files}
    sources = {store.unqualify(manifest_path(entry.source)) for entry in manifest.files}
    assert dests == {"/path/to/dest/" + name for name in HADOOP_WROTE}
    assert sources == {f"{attempt}/{name}" for name in HADOOP_WROTE}
    for entry in manifest.files:  # and we write exactly the strings Hadoop wrote
        assert manifest_uri(manifest_path(entry.dest)) == entry.dest
    directories = {store.unqualify(manifest_path(d.dest)) for d in manifest.directories}
    assert directories == {"/path/to/dest/" + name.split("/")[0] for name in HADOOP_WROTE}
    success = decode_success((NAMES / "_SUCCESS.json").read_bytes())
    assert sorted(success.filenames) == sorted(ROOT + uri for uri in HADOOP_WROTE.values())
    raw = json.loads((NAMES / "_SUCCESS.json").read_text(encoding="utf-8"))
    assert raw["success"] is True


def test_unicode_spaces_are_javas_space_chars() -> None:
    spaces = "".join(
        chr(c)
        for c in range(0x80, sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Zs", "Zl", "Zp")
    )
    listed = re.compile(f"[{UNICODE_SPACES}]")
    assert "".join(listed.findall(spaces)) == spaces
    assert all(manifest_uri(space) != space for space in spaces)


@pytest.mark.parametrize(
    ("uri", "where"),
    [
        ("file:/d/a b", "' b'"),
        ("file:/d/a#b", "'#b'"),
        ("file:/d/a?b", "'?b'"),
        ("file:/d/100%", "'%'"),
        ("file:/d/%zz", "'%zz'"),
        ("file:/d/a\u00a0b", "'\\xa0b'"),
        ("file:/d/a\tb", "'\\tb'"),
    ],
)
def test_not_hadoops_uri_form_is_refused(uri: str, where: str) -> None:
    with pytest.raises(ValueError, match=re.escape(where)):
        manifest_path(uri)


names = st.text(
    st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=12
).filter(lambda n: n not in (".", ".."))
paths = st.lists(names, min_size=1, max_size=4).map("/".join)


@given(paths)
def test_round_trip(path: str) -> None:
    qualified = ROOT + path
    uri = manifest_uri(qualified)
    assert _URI_PATH.fullmatch(uri), uri
    assert manifest_path(uri) == qualified
    assert manifest_uri(manifest_path(uri)) == uri


@given(st.lists(st.tuples(names, st.text(max_size=12)), min_size=1, max_size=3))
def test_spark_partition_values_round_trip(partitions: list[tuple[str, str]]) -> None:
    directory = "/".join(f"{escape_path_name(c)}={escape_path_name(v)}" for c, v in partitions)
    qualified = ROOT + directory + "/part-00000.parquet"
    uri = manifest_uri(qualified)
    assert manifest_path(uri) == qualified
    # a Spark escape such as %3A is kept as a name: Hadoop must not decode it to a colon
    assert uri.count("%25") >= directory.count("%")


@given(st.sampled_from([" ", "%", "#", "?", ":", "+", "ü", "日", "\u00a0", "%3A"]), paths)
def test_special_characters_round_trip(special: str, path: str) -> None:
    qualified = f"{ROOT}{path}{special}x/{special}"
    assert manifest_path(manifest_uri(qualified)) == qualified


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:/d/x/a/b.dat", "a/b.dat"),
        ("file:/d/x/a%20b", None),  # escaped: the general path unescapes it
        ("file:/d/x/a b", None),  # illegal in a URI: the general path refuses it
        ("file:/d/x/é", None),
        ("file:/d/x/a//b", None),
        ("file:/d/x//a", None),
        ("file:/d/x/./a", None),
        ("file:/d/x/a/../b", None),
        ("file:/d/x/..", None),
        ("file:/d/x/a/", None),
        ("file:/d/x/", None),
        ("file:/d/xy/a", None),  # another directory sharing the prefix's characters
        ("file:/d/x/a\x00b", None),
    ],
)
def test_plain_suffix_takes_only_clean_relative_paths(uri: str, expected: str | None) -> None:
    assert plain_suffix(uri, "file:/d/x/") == expected


@given(st.text(alphabet=st.sampled_from("ab/.%é \x00#?"), min_size=1, max_size=10))
def test_plain_suffix_agrees_with_the_general_path(rest: str) -> None:
    suffix = plain_suffix("file:/d/x/" + rest, "file:/d/x/")
    if suffix is not None:
        assert suffix == rest
        assert manifest_path("file:/d/x/" + rest) == "file:/d/x/" + rest
        check_clean("/d/x/" + rest)  # raises if the fast path let a bad path through
