"""Command line interface (typer)."""
