"""`scalestack export`: write a Trace in another tool's format."""

from __future__ import annotations

import click

import scalestack


@click.command()
@click.argument("fmt", type=click.Choice(["chrome", "collapsed"]))
@click.argument("path", metavar="TRACE")
@click.option("-o", "--output", help="Output file (default: TRACE with .json, or .collapsed).")
def command(fmt, path, output):
    """Export TRACE as Chrome/Perfetto JSON (open it at ui.perfetto.dev or chrome://tracing), or its
    criticality-weighted call stacks as collapsed stacks (`collapsed`: flamegraph.pl, speedscope;
    weights in microseconds of criticality; needs a recording made with --stacks)."""
    trace = scalestack.load(path)
    if fmt == "collapsed":
        from scalestack.analysis.where import collapsed, where
        from scalestack.fileio import atomic_write

        out = output or path.rsplit(".", 1)[0] + ".collapsed"
        atomic_write(out, collapsed(where(trace, top=10**6)).encode())
        click.echo(f"scalestack: wrote {out}", err=True)
        return
    from scalestack.ingest.chrome import export_chrome

    out = output or path.rsplit(".", 1)[0] + ".json"
    export_chrome(trace, out)
    click.echo(f"scalestack: wrote {out}", err=True)
