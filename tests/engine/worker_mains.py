"""Worker mains for the tests of ``aiocommit.io.processes``: this module imports nothing
of aiocommit, so a worker running one imports only what the main itself asks for."""

from __future__ import annotations

import sys


async def modules_loaded(names: list[str], channel: object) -> dict[str, bool]:
    """Which of ``names`` the worker's interpreter has imported, before and after it asks
    the package for a public name."""
    before = {name: name in sys.modules for name in names}
    from aiocommit import commit_job

    return {**before, "after": commit_job.__module__ == "aiocommit.client.job"}
