"""``python -m aiocommit.cli``: the ``aiocommit`` command."""

from aiocommit.cli.commands import main

main()
