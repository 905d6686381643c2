"""The pyspark seam (``integrations/spark/seam.py``): this pyspark has every name
aiocommit takes from it beyond its documented API, and a release that drops one is
reported by name. CI runs this on every pyspark release it claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from aiocommit.integrations.spark import seam

SRC = Path(seam.__file__).parents[2]


def test_this_pyspark_has_every_name_aiocommit_uses(spark: SparkSession) -> None:
    found = seam.problems(spark)
    assert found == [], "\n".join(found)
    assert seam.SUPPORTED.count(seam.PYSPARK) == 1, f"pyspark {seam.VERSION} is not claimed"


@pytest.mark.skipif(seam.HAS_DATA_SOURCES, reason="this pyspark has Python data sources")
def test_register_without_python_data_sources_names_the_way_to_write(
    spark: SparkSession,
) -> None:
    """pyspark 3.5: ``register()`` refuses with an aiocommit error (a ``RuntimeError``
    too, as before) naming ``write()``; the session's writer is left unwrapped."""
    from pyspark.sql.readwriter import DataFrameWriter

    from aiocommit.errors import AiocommitError
    from aiocommit.integrations.spark import register

    save = DataFrameWriter.save
    with pytest.raises(AiocommitError, match=r"pyspark >= 4\.0; write with .*write\(df") as e:
        register(spark)
    assert isinstance(e.value, RuntimeError)
    assert DataFrameWriter.save is save


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason="register() needs pyspark >= 4.0")
def test_a_wrapped_method_that_is_gone_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    monkeypatch.setattr(DataFrameWriter, "insertInto", None)  # as if a release dropped it
    (found,) = seam.problems()
    assert "pyspark.sql.readwriter.DataFrameWriter.insertInto is missing" in found
    with pytest.raises(seam.PysparkChanged, match=r"DataFrameWriter\.insertInto is missing"):
        seam.wrapped_methods(DataFrameWriter, tables_too=True)


def test_a_module_function_that_is_gone_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.pandas import types

    monkeypatch.delattr(types, "to_arrow_schema")
    (found,) = seam.problems()
    assert f"pyspark {seam.VERSION}: pyspark.sql.pandas.types.to_arrow_schema is missing" in (found)


def test_private_attributes_that_are_gone_are_named(spark: SparkSession) -> None:
    class Bare:
        pass

    with pytest.raises(seam.PysparkChanged, match=r"Bare\._spark is missing"):
        seam.writer_session(Bare())  # type: ignore[arg-type]
    with pytest.raises(seam.PysparkChanged, match=r"Bare\._df is missing"):
        seam.writer_dataframe(Bare())  # type: ignore[arg-type]


#: pyspark's private attributes and modules outside its documented API
PRIVATE = re.compile(
    r"\._(spark|df|desc|jvm|jsparkSession|jdf|jwrite|jsc|get_j_\w+)\b"
    r"|pyspark\.sql\.(pandas|variant_utils|datasource|worker|utils)\b|pyspark\.errors\.exceptions\.captured"
)


def test_private_pyspark_names_are_used_in_the_seam_only() -> None:
    """Every private pyspark name (and every module outside pyspark's documented API)
    that the library touches is in ``seam.py``."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if path.name == "seam.py" or "pyspark" not in text:
            continue
        offenders += [
            f"{path.relative_to(SRC)}:{number}: {line.strip()}"
            for number, line in enumerate(text.splitlines(), 1)
            if PRIVATE.search(line)
        ]
    assert offenders == [], "\n".join(offenders)
