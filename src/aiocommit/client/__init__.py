"""The public API over the committers: job and task set-up, commit, abort and inspection."""
