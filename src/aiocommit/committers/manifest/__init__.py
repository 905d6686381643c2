"""Hadoop's Manifest Committer: task commit saves a JSON manifest; job commit loads them,
creates directories, renames every file into place. One stage per module."""
