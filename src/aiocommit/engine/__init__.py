"""The engine: job and task sessions and the public API (setup, commit, abort)."""
