"""`python -m kforge_search` is the `kforge` command."""

from kforge_search.cli.app import main

main()
