"""`scalestack export`: write a Trace in another tool's format."""

from __future__ import annotations

import click

import scalestack


@click.command()
@click.argument("fmt", type=click.Choice(["chrome"]))
@click.argument("path", metavar="TRACE")
@click.option("-o", "--output", help="Output file (default: TRACE with .json).")
def command(fmt, path, output):
    """Export TRACE as Chrome/Perfetto JSON (open it at ui.perfetto.dev or chrome://tracing)."""
    from scalestack.ingest.chrome import export_chrome

    trace = scalestack.load(path)
    out = output or path.rsplit(".", 1)[0] + ".json"
    export_chrome(trace, out)
    click.echo(f"scalestack: wrote {out}", err=True)
