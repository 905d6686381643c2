"""Every file below a directory of the store."""

from __future__ import annotations

from collections.abc import Callable

from aiocommit.committers.common.context import StageContext
from aiocommit.errors import NotFound


async def walk_files(context: StageContext, root: str, skip: Callable[[str], bool]) -> list[str]:
    """Every file below ``root`` whose path ``skip`` does not refuse (nor anything below a
    refused directory); an absent ``root`` has none."""
    found: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            async for page in context.ops.list_dir(directory):
                for status in page:
                    if skip(status.path):
                        continue
                    if status.is_dir:
                        pending.append(status.path)
                    else:
                        found.append(status.path)
        except NotFound:
            continue
    return found
