"""``python -m aiocommit_stress``: see ``aiocommit_stress/cli.py`` and ``stress/README.md``."""

import sys

if len(sys.argv) > 1 and sys.argv[1] == "crash-child":
    # the crash scenario's child: started hundreds of times, so no click or rich
    from aiocommit_stress.crash import child_main

    child_main(sys.argv[2:])
elif len(sys.argv) > 1 and sys.argv[1] == "crash-child-s3":
    from aiocommit_stress.s3 import child_main as s3_child_main

    s3_child_main(sys.argv[2:])
elif len(sys.argv) > 1 and sys.argv[1] == "kill-cli-child":
    # the kill-anywhere scenario's child: the real CLI over a store that kills it
    from aiocommit_stress.kill_cli import cli_child_main

    cli_child_main(sys.argv[2:])
else:
    from aiocommit_stress.cli import main

    main(prog_name="python -m aiocommit_stress")
