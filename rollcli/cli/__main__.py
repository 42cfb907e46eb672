"""``python -m rollcli.cli``: the same as the ``rollcli`` command."""

from rollcli.cli.app import main

main()
