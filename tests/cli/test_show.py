"""``aiocommit show``: _SUCCESS files, summary reports and manifests, ours and Hadoop's."""

from __future__ import annotations

import json
from pathlib import Path

from aiocommit.cli.exits import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE
from tests.cli.conftest import HADOOP_MANIFEST, HADOOP_SUCCESS, Cli, Dest, one_error_line


def test_hadoop_success_summary(cli: Cli) -> None:
    result = cli("show", str(HADOOP_SUCCESS))
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "_SUCCESS of job job_202611210000_0001" in text
    assert "state" in text and "SUCCESS" in text
    assert "files                12" in text
    assert "384 (384 B)" in text
    assert "stages (ms)" in text and "job_stage_rename_files" in text
    assert "IOStatistics" in text and "op_mkdirs" in text
    assert "principal" in text and "committer_commit_job" in text
    # zero counters are left out of the statistics table
    assert "op_msync.failures" not in text and "store_io_retry" not in text
    assert "slowfile:/path/to/dest/part=01/part-00002-00001.dat" in text


def test_hadoop_success_as_json(cli: Cli) -> None:
    result = cli("show", str(HADOOP_SUCCESS), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "success"
    assert data["job_id"] == "job_202611210000_0001"
    assert (data["files"], data["bytes"], data["tasks"]) == (12, 384, 3)
    assert data["success"] is True and data["state"] == "SUCCESS"
    stages = {row["name"]: row for row in data["stages"]}
    assert stages["job_stage_load_manifests"]["mean"] == 172.0
    assert stages["task_stage_setup"]["count"] == 3
    statistics = {row["name"]: row for row in data["statistics"]}
    assert statistics["op_get_file_status"]["failures"] == 11
    assert statistics["op_mkdirs"]["max"] == 28
    assert "job_stage_rename_files" not in statistics
    assert len(data["filenames"]) == 12
    assert data["diagnostics"]["principal"] == "root"


def test_hadoop_manifest(cli: Cli) -> None:
    result = cli("show", str(HADOOP_MANIFEST))
    assert result.exit_code == 0, result.output
    assert "task manifest of task_202611210000_0001_m_000000" in result.stdout
    assert "attempt_202611210000_0001_m_000000_0" in result.stdout
    data = json.loads(cli("show", str(HADOOP_MANIFEST), "--json").stdout)
    assert data["kind"] == "manifest"
    assert (data["files"], data["bytes"], data["directories"]) == (4, 128, 2)
    assert data["directories_to_create"] == 2
    assert data["job_id"] == "job_202611210000_0001"


def test_our_success_and_manifest(cli: Cli, dest: Dest) -> None:
    job_id, size = dest.job(tasks=2, files=3)
    manifests = dest.url_at(f"_temporary/{job_id}/00/manifests")
    names = sorted(dest.output())  # nothing committed yet
    assert names == []
    manifest = json.loads(
        cli("show", manifests + f"/task_{job_id[4:]}_m_000001-manifest.json", "--json").stdout
    )
    assert manifest["task_id"] == f"task_{job_id[4:]}_m_000001"
    assert manifest["files"] == 3
    dest.commit(job_id)
    # a directory means its _SUCCESS
    result = cli("show", dest.url)
    assert result.exit_code == 0, result.output
    assert f"_SUCCESS of job {job_id}" in result.stdout
    data = json.loads(cli("show", dest.url_at("_SUCCESS"), "--json").stdout)
    assert (data["files"], data["bytes"], data["tasks"]) == (6, size, 2)
    assert data["directories_created"] == 3
    assert any(row["name"] == "job_stage_rename_files" for row in data["stages"])


def test_failed_summary_report(cli: Cli, dest: Dest, tmp_path: Path) -> None:
    job_id, _ = dest.job(tasks=1, files=2)
    dest.write("part=0/part-00000-0000.dat", b"someone else's")
    reports = tmp_path / "reports"
    result = cli("commit", dest.url, "--job-id", job_id, "--report-dir", str(reports))
    assert result.exit_code == EXIT_FAILED
    shown = cli("show", str(reports / f"summary-{job_id}.json"))
    assert shown.exit_code == 0, shown.output
    assert "FAILED" in shown.stdout
    assert "failed stage         job_stage_resolve_conflicts" in shown.stdout
    assert "exception" in shown.stdout and "OutputConflict" in shown.stdout


def test_missing_path(cli: Cli, dest: Dest) -> None:
    result = cli("show", dest.url_at("nothing/here"))
    assert result.exit_code == EXIT_NOT_FOUND
    assert "nothing/here" in one_error_line(result)
    assert result.stdout == ""


def test_directory_without_success(cli: Cli, dest: Dest) -> None:
    result = cli("show", dest.url)
    assert result.exit_code == EXIT_NOT_FOUND
    assert "without a _SUCCESS" in one_error_line(result)


def test_not_a_summary(cli: Cli, dest: Dest) -> None:
    dest.write("notes.txt", b"hello")
    result = cli("show", dest.url_at("notes.txt"))
    assert result.exit_code == EXIT_FAILED
    assert "not JSON" in one_error_line(result)
    dest.write("other.json", b'{"answer": 42}')
    result = cli("show", dest.url_at("other.json"))
    assert result.exit_code == EXIT_FAILED
    assert "neither a task manifest nor a _SUCCESS" in one_error_line(result)
    dest.write("bad.json", b'{"type": "x", "files": []}')
    result = cli("show", dest.url_at("bad.json"))
    assert result.exit_code == EXIT_FAILED
    assert "wrong manifest type" in one_error_line(result)


def test_bad_arguments(cli: Cli) -> None:
    assert cli("show").exit_code == EXIT_USAGE
    assert cli("show", str(HADOOP_SUCCESS), "--nope").exit_code == EXIT_USAGE
    result = cli("show", "nosuch://bucket/x")
    assert result.exit_code == EXIT_USAGE
    assert "no store adapter for URL scheme 'nosuch'" in one_error_line(result)
