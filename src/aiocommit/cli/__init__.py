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

Modules: ``exits`` (exit codes, one-line failures), ``units`` (sizes, durations),
``summary`` (files as plain data), ``render`` (printing for people), ``jobs`` (job
inspection), ``flags`` (option flags), ``progress`` (the progress bar), ``commands``
(the click commands).
"""

from aiocommit.cli.commands import main
from aiocommit.cli.exits import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from aiocommit.cli.flags import (
    COMMIT_ONLY_OPTIONS,
    build_options,
    format_default,
    option_fields,
    option_flag,
    option_name,
)
from aiocommit.cli.progress import ProgressBar
from aiocommit.cli.units import human_bytes, human_duration, parse_duration
from aiocommit.engine.jobs import job_started

__all__ = [
    "COMMIT_ONLY_OPTIONS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "ProgressBar",
    "build_options",
    "format_default",
    "human_bytes",
    "human_duration",
    "job_started",
    "main",
    "option_fields",
    "option_flag",
    "option_name",
    "parse_duration",
]
