"""The S3A committers' stages (staging, partitioned, magic): uploads are completed,
never renamed. One stage per module, in the order a job runs them:

Task side
    ``upload``: a file becomes an uncompleted multipart upload of its final key.
    ``save_pendingset``: the task attempt's uploads saved as its pending set.

Job side
    ``load_pendingsets``: every committed task's pending set loaded and checked.
    ``resolve_conflicts``: the conflict mode applied to output already there.
    ``complete_uploads``: every upload completed: the output becomes visible.
    ``abort_uploads``: uploads aborted (task failure, job abort, cleanup).

``completed`` recognises an upload already completed into its destination (by the etag
the parts complete into); ``walk`` lists a directory tree.
"""
