"""The ``aiocommit`` command (and ``python -m aiocommit``): the command line of
``aiocommit.cli``, or one line saying how to install it when its extra is missing."""

from __future__ import annotations

import sys

#: the packages of the ``cli`` extra
CLI_PACKAGES = ("click", "rich")
EXIT_UNAVAILABLE = 4


def main() -> None:
    """Run the command line; exit 4 with an install hint if click or rich is missing."""
    try:
        from aiocommit.cli import main as command
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in CLI_PACKAGES:
            raise
        print(
            f"aiocommit: error: the command line needs {error.name!r}, which is not "
            "installed: pip install 'aiocommit[cli]'",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_UNAVAILABLE) from None
    command()


if __name__ == "__main__":
    main()
