"""Statistic names. Hadoop's names where Hadoop has one, so reports read the same."""

from __future__ import annotations

# store operations (durations)
OP_LIST_STATUS = "op_list_status"
OP_GET_FILE_STATUS = "op_get_file_status"
OP_MKDIRS = "op_mkdirs"
OP_DELETE = "op_delete"
OP_DELETE_DIR = "op_delete_dir"
OP_RENAME = "op_rename"
# reads, named by what they read
OP_LOAD_MANIFEST = "op_load_manifest"
OP_LOAD_SUCCESS = "op_load_success_marker"
OP_LOAD_COMMIT_PLAN = "op_load_commit_plan"
#: the S3A committers' records: a task's ``.pendingset`` and a magic file's ``.pending``
OP_LOAD_PENDING_SET = "op_load_pending_set"
OP_LOAD_PENDING = "op_load_pending"
#: the job's committer record (``committer.json``)
OP_LOAD_COMMITTER = "op_load_committer_record"
#: aiocommit: a read of the destination's publish lease
OP_LOAD_LEASE = "op_load_lease"
#: aiocommit: a read of a job's finished record (``_temporary/JOB/_SUCCESS.finished``)
OP_LOAD_FINISHED = "op_load_finished_record"
OP_WRITE = "op_save_file"
OP_UPLOAD = "op_upload_file"
COMMIT_FILE_RENAME = "commit_file_rename"
OP_DELETE_FILE_UNDER_DESTINATION = "op_delete_file_under_destination"
OP_CREATE_ONE_DIRECTORY = "op_create_one_directory"
OP_DIRECTORY_SCAN = "op_directory_scan"

# counters
COMMIT_FILE_RENAME_RECOVERED = "commit_file_rename_recovered"
COMMITTER_BYTES_COMMITTED = "committer_bytes_committed"
COMMITTER_FILES_COMMITTED = "committer_files_committed"
COMMITTER_TASKS_COMPLETED = "committer_tasks_completed"
COMMITTER_TASK_FILE_COUNT = "committer_task_file_count"
COMMITTER_TASK_FILE_SIZE = "committer_task_file_size"
COMMITTER_TASK_DIRECTORY_COUNT = "committer_task_directory_count"
COMMITTER_TASK_DIRECTORY_DEPTH = "committer_task_directory_depth"
COMMITTER_TASK_MANIFEST_FILE_SIZE = "committer_task_manifest_file_size"
COMMITTER_DIRECTORIES_CREATED = "committer_directories_created"
COMMITTER_FILES_DELETED_IN_THE_WAY = "committer_files_deleted_in_the_way"
COMMITTER_TARGET_FILES_DELETED = "committer_target_files_deleted"
# conflict resolution (ours): old files a replace moved aside or deleted, and restored
COMMITTER_FILES_REPLACED = "committer_files_replaced"
COMMITTER_FILES_RESTORED = "committer_files_restored"
COMMITTER_FILES_ALREADY_COMMITTED = "committer_files_already_committed"
COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED = "committer_task_attempt_directories_deleted"
COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED = "committer_uncommitted_task_attempts_deleted"

# resilience (ours; Hadoop has only store_io_rate_limited)
STORE_IO_RETRY = "store_io_retry"
STORE_IO_THROTTLED = "store_io_throttled"
STORE_IO_TRANSIENT = "store_io_transient"
STORE_IO_BACKOFF = "store_io_backoff"
STORE_IO_RATE_LIMITED = "store_io_rate_limited"
STORE_IO_CONCURRENCY_DECREASED = "store_io_concurrency_decreased"
#: times the adaptive rate (requests/s) dropped to what the store admitted
STORE_IO_RATE_DECREASED = "store_io_rate_decreased"
#: times the adaptive rate began pacing the calls (a storm read as a limit of requests a
#: second); each engagement's decreases count in ``STORE_IO_RATE_DECREASED`` too
STORE_IO_RATE_ENGAGED = "store_io_rate_engaged"

# gauges (ours)
#: milliseconds from the start of the job commit to writing _SUCCESS
JOB_COMMIT_ELAPSED_MS = "job_commit_elapsed_ms"
JOB_RENAME_PROCESSES = "job_rename_processes"
STORE_IO_CONCURRENCY_LIMIT = "store_io_concurrency_limit"
STORE_IO_CONCURRENCY_PEAK = "store_io_concurrency_peak"

# stages (durations)
JOB_STAGE_SETUP = "job_stage_setup"
JOB_STAGE_LOAD_MANIFESTS = "job_stage_load_manifests"
JOB_STAGE_RESOLVE_CONFLICTS = "job_stage_resolve_conflicts"
JOB_STAGE_CREATE_TARGET_DIRS = "job_stage_create_target_dirs"
JOB_STAGE_RENAME_FILES = "job_stage_rename_files"
JOB_STAGE_SAVE_SUCCESS = "job_stage_save_success_marker"
JOB_STAGE_VALIDATE_OUTPUT = "job_stage_optional_validate_output"
JOB_STAGE_CLEANUP = "job_stage_cleanup"
JOB_STAGE_ABORT = "job_stage_abort"
#: finding the job's committer (its record, or what its files show)
JOB_STAGE_FIND_COMMITTER = "job_stage_find_committer"
COMMITTER_COMMIT_JOB = "committer_commit_job"
TASK_STAGE_SETUP = "task_stage_setup"
TASK_STAGE_SCAN_DIRECTORY = "task_stage_scan_directory"
TASK_STAGE_SAVE_MANIFEST = "task_stage_save_task_manifest"
TASK_STAGE_COMMIT = "task_stage_commit"
TASK_STAGE_ABORT_TASK = "task_stage_abort_task"

STORE_OPERATIONS = (
    OP_LIST_STATUS,
    OP_GET_FILE_STATUS,
    OP_MKDIRS,
    OP_DELETE,
    OP_DELETE_DIR,
    OP_RENAME,
    OP_LOAD_MANIFEST,
    OP_LOAD_SUCCESS,
    OP_LOAD_COMMIT_PLAN,
    OP_LOAD_PENDING_SET,
    OP_LOAD_PENDING,
    OP_LOAD_COMMITTER,
    OP_LOAD_LEASE,
    OP_LOAD_FINISHED,
    OP_WRITE,
    COMMIT_FILE_RENAME,
)
JOB_STAGES = (
    JOB_STAGE_SETUP,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_CREATE_TARGET_DIRS,
    JOB_STAGE_RENAME_FILES,
    JOB_STAGE_VALIDATE_OUTPUT,
    JOB_STAGE_SAVE_SUCCESS,
    JOB_STAGE_CLEANUP,
    JOB_STAGE_ABORT,
    JOB_STAGE_FIND_COMMITTER,
    COMMITTER_COMMIT_JOB,
)
TASK_STAGES = (
    TASK_STAGE_SETUP,
    TASK_STAGE_SCAN_DIRECTORY,
    TASK_STAGE_SAVE_MANIFEST,
    TASK_STAGE_COMMIT,
    TASK_STAGE_ABORT_TASK,
)
COUNTERS = (
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    STORE_IO_RETRY,
    STORE_IO_THROTTLED,
    STORE_IO_TRANSIENT,
    STORE_IO_RATE_LIMITED,
)
