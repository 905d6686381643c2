"""Issue #12's abort and bad-input cases through the real cloud SDKs over HTTP to the
emulators (ADLS Gen2, GCS), where they apply: the same test bodies as on the local and
memory stores. Cases about directories skip on GCS (it has none); links are local only."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import pytest

from aiocommit.stores.base import Store
from tests.engine import test_bad_input_refused as bad
from tests.engine import test_job_states as states

Case = Callable[[tuple[Store, str]], Awaitable[None]]

CASES: dict[str, Case] = {
    "1 committed job, cleanup skipped": functools.partial(
        states.test_abort_never_deletes_a_committed_jobs_output, how="cleanup skipped"
    ),
    "1 committed job, cleanup failed": functools.partial(
        states.test_abort_never_deletes_a_committed_jobs_output, how="cleanup failure ignored"
    ),
    "13.5 setup keeps _SUCCESS": states.test_setup_keeps_an_older_success_until_renaming_starts,
    "2 late attempt": states.test_abort_after_a_late_attempt_replaced_a_manifest,
    "3 abort stopped in cleanup": states.test_abort_interrupted_in_its_cleanup_can_be_rerun,
    "4 every attempt": states.test_abort_of_another_attempt_undoes_every_attempt,
    "6 created directories": states.test_abort_removes_the_empty_directories_the_commit_created,
    "states": states.test_list_jobs_reports_each_state_through_retries,
    "8 borrowed attempt dir": functools.partial(
        bad.test_manifest_with_another_attempts_directory_is_refused, borrow="directory only"
    ),
    "9 directory source": bad.test_a_directory_source_is_never_moved,
    "10 file/directory clash": functools.partial(
        bad.test_file_and_directory_clash_within_the_job, delete_target_files=True
    ),
    "11 _SUCCESS reserved": functools.partial(bad.test_success_is_reserved, name="_SUCCESS/x"),
    "12 Unicode twins": bad.test_unicode_normalisation_twins_conflict,
}


#: cases that do not apply to a store (none now: ADLS Gen2, whose rename moves a directory
#: whole, has the job's sources checked before any rename)
NOT_ON: dict[str, str] = {}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_case_on_cloud_store(
    cloud_store_root: tuple[Store, str], case: str, request: pytest.FixtureRequest
) -> None:
    if NOT_ON.get(case) == request.node.callspec.params["cloud_store_root"]:
        pytest.skip(f"case {case} does not apply here (see NOT_ON)")
    await CASES[case](cloud_store_root)
