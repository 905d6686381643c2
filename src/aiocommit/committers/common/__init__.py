"""What every committer shares: the committer interface, the job-commit frame, the stage
context, the commit plan and job state, conflicts, ``_SUCCESS``, cleanup and the summary."""
