"""The committers: ``common`` (shared by every family), ``manifest`` (Hadoop's Manifest
Committer), ``s3a`` (Hadoop's S3A staging and magic committers) and ``factory``, which
chooses one per job. The two families do not import each other."""
