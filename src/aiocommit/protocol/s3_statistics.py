"""Statistic names of the S3A committers, as Hadoop's S3A names them."""

from __future__ import annotations

# store operations (durations)
OP_CREATE_UPLOAD = "object_multipart_initiated"
OP_UPLOAD_PART = "multipart_upload_part_put"
OP_COMPLETE_UPLOAD = "multipart_upload_completed"
OP_ABORT_UPLOAD = "object_multipart_aborted"
OP_LIST_UPLOADS = "object_multipart_list"

# counters
COMMITTER_COMMITS_CREATED = "committer_commits_created"
COMMITTER_COMMITS_COMPLETED = "committer_commits_completed"
COMMITTER_COMMITS_ABORTED = "committer_commits_aborted"
COMMITTER_COMMITS_REVERTED = "committer_commits_reverted"
COMMITTER_COMMITS_RECOVERED = "committer_commits_recovered"
COMMITTER_BYTES_UPLOADED = "committer_bytes_uploaded"
COMMITTER_MAGIC_FILES_CREATED = "committer_magic_files_created"
COMMITTER_PENDING_UPLOADS_ABORTED = "committer_pending_uploads_aborted"
COMMITTER_TARGET_FILES_DELETED = "committer_target_files_deleted"

# stages (durations)
JOB_STAGE_LOAD_PENDINGSETS = "job_stage_load_manifests"  # the manifest committer's slot
JOB_STAGE_RESOLVE_CONFLICTS = "job_stage_resolve_conflicts"
JOB_STAGE_COMPLETE_UPLOADS = "job_stage_complete_uploads"
TASK_STAGE_UPLOAD = "task_stage_upload_pending"
TASK_STAGE_SAVE_PENDINGSET = "task_stage_save_pendingset"
