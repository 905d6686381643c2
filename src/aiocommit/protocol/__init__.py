"""The Manifest Committer's on-store layout and file formats, compatible with Hadoop."""
