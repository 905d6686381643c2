"""What the local filesystem itself allows: renames per second with no committer at all.

On the local store the "store rate limit" of the ideal is the kernel's: one ``lstat`` and
one ``rename`` per file (what ``LocalStore.rename`` asks of it), from one process per
core, each in a bare loop, on a tree of the job's shape (tasks x files over ``dirs``
destination directories) in the same filesystem. Cross-directory renames serialise on
a filesystem-wide lock in Linux, so more processes than cores buy nothing here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

#: the child: lstat + rename of its share of the tree, in a bare loop
_RENAME_LOOP = """
import os, sys
root, dirs, first, step, tasks, files = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
sys.stdout.write("r")
sys.stdout.flush()
sys.stdin.read(1)  # every child starts on the parent's word
for task in range(first, tasks, step):
    for n in range(files):
        source = f"{root}/t{task}/f{n}"
        os.lstat(source)
        os.rename(source, f"{root}/d{n % dirs}/t{task}-f{n}")
"""


def renames_per_second(
    directory: str, *, tasks: int, files_per_task: int, dirs: int, processes: int
) -> float:
    """Renames per second of a bare ``lstat`` + ``rename`` loop in ``processes``
    processes, on a fresh tree of the job's shape below ``directory``."""
    root = tempfile.mkdtemp(prefix="aiocommit-fs-floor-", dir=directory)
    try:
        for d in range(dirs):
            os.mkdir(f"{root}/d{d}")
        for task in range(tasks):
            # one file per task, and hard links to it: creating 100,000 files takes
            # minutes on a slow virtual disk, and a rename moves a name, not its inode
            os.mkdir(f"{root}/t{task}")
            first = f"{root}/t{task}/f0"
            os.close(os.open(first, os.O_CREAT | os.O_WRONLY, 0o644))
            for n in range(1, files_per_task):
                os.link(first, f"{root}/t{task}/f{n}")
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RENAME_LOOP,
                    root,
                    str(dirs),
                    str(first),
                    str(processes),
                    str(tasks),
                    str(files_per_task),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            for first in range(processes)
        ]
        try:
            for child in children:  # each interpreter started and waiting
                assert child.stdout is not None
                child.stdout.read(1)
            begin = time.perf_counter()
            for child in children:
                assert child.stdin is not None
                child.stdin.write(b"g")
                child.stdin.close()
            codes = [child.wait() for child in children]
            seconds = time.perf_counter() - begin
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                child.wait()
                for pipe in (child.stdin, child.stdout):
                    if pipe is not None:
                        pipe.close()
        if any(codes):
            raise RuntimeError(f"filesystem floor: a rename loop failed ({codes})")
        return tasks * files_per_task / seconds
    finally:
        shutil.rmtree(root, ignore_errors=True)
