"""What a Spark session and a write's options say: session confs, the session's Hadoop
committer keys, option values as text, and paths as Spark's errors name them."""

from __future__ import annotations

import os
from typing import Any

#: the save modes that refuse an existing destination
ERROR_MODES = ("error", "errorifexists", "default")


def option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: the Hadoop key namespaces a session conf may set, with or without ``spark.hadoop.``
#: (Spark hands both to the job's Hadoop configuration)
HADOOP_NAMESPACES = ("fs.s3a.", "mapreduce.")


def hadoop_session_options(confs: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """The session's Hadoop confs (``spark.hadoop.fs.s3a.committer.name``,
    ``spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs``, per-bucket
    ``fs.s3a.bucket.*`` ...) that the options tree takes, for the settings the write's
    options (``given``, lower-cased keys) do not set under any spelling: an explicit
    option wins, as in Spark. Never credentials (the tree has no key for them)."""
    from aiocommit.options import CommitOptions

    set_by_write = {CommitOptions.option_for(key) for key in given} - {None}
    set_by_write |= {_bucket_leaf(key) for key in given} - {None}
    found: dict[str, str] = {}
    for conf, value in sorted(confs.items()):
        key = conf.lower()
        bare = key.removeprefix("spark.hadoop.")
        if not bare.startswith(HADOOP_NAMESPACES) or key in given:
            continue
        leaf = CommitOptions.option_for(bare) or _bucket_leaf(bare)
        if leaf is None or leaf in set_by_write:
            continue
        found[key] = value
    return found


def _bucket_leaf(key: str) -> str | None:
    """The option a per-bucket S3A key (``fs.s3a.bucket.BUCKET.KEY``) sets, or None."""
    from aiocommit.options import CommitOptions

    bare = key.removeprefix("spark.hadoop.")
    if not bare.startswith("fs.s3a.bucket."):
        return None
    _, _, rest = bare.removeprefix("fs.s3a.bucket.").partition(".")
    return CommitOptions.option_for("fs.s3a." + rest) if rest else None


def all_confs(spark: Any) -> dict[str, str]:
    """Every conf the session has set (its runtime conf holds the application's
    ``spark.hadoop.*`` too); empty where the session cannot list them."""
    try:
        confs = spark.conf.getAll
        listed = confs() if callable(confs) else confs
    except Exception:  # a session that cannot list its confs (an old Connect server)
        return {}
    return {str(k): str(v) for k, v in dict(listed).items()}


def qualified_path(path: str) -> str:
    """A path as Spark's errors name it: a local path as ``file:/abs/path``."""
    if "://" in path or path.startswith("file:"):
        return path
    return "file:" + os.path.abspath(path)


def session_conf(spark: Any, key: str) -> str | None:
    """A session conf's value; None when it is not set and has no default."""
    try:
        value = spark.conf.get(key)
    except Exception:  # not set and no default
        return None
    return None if value is None else str(value)
