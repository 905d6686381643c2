"""The ``aiocommit`` command.

Subcommands: ``demo``, ``show``, ``jobs``, ``commit``, ``abort``, ``cleanup`` and
``stress``. Paths are store URLs (``file:///…``, ``memory://NAME/…``, ``abfss://…``,
``gs://…``) or local paths; cloud credentials come from the environment, as each store
adapter documents.

Exit codes:

* 0 - done; also an ``abort`` or ``cleanup --job-id`` of a job that is not there (both
  are idempotent: nothing left is what they want), and output its reader cut short
  (``aiocommit show … | head``);
* 1 - the operation failed (a commit, abort or cleanup error; a malformed file), or
  ``cleanup`` refused a job whose commit is under way;
* 2 - usage error: bad arguments, option values or URL;
* 3 - not found: the path, the destination, or the job to ``commit``, does not exist;
* 4 - unavailable: a store adapter's packages or the stress harness are not installed;
* 130 - interrupted.

This package exports ``main`` only. Modules: ``exits`` (exit codes, one-line failures),
``units`` (sizes, durations), ``summary`` (files as plain data), ``render`` (printing for
people), ``jobs`` (job inspection), ``flags`` (option flags), ``progress`` (the progress
bar), ``entry_points`` (commands other packages add), ``commands`` (the click commands).
"""

from aiocommit.cli.commands import main

__all__ = ["main"]
