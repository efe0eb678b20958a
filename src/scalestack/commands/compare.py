"""`scalestack compare`: what changed between two recordings, ranked by its effect on wall time."""

from __future__ import annotations

import click

import scalestack


@click.command()
@click.argument("paths", metavar="A B [C ...]", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write the comparison as JSON here.")
@click.option("--top", type=int, default=12, show_default=True, help="Rows to print (0: all).")
def command(paths, as_json, output, top):
    """Compare trace B (and C, ...) with trace A, the baseline (traces or `record --aggregate` files).

    Threads are matched by role, name pattern (digits stripped) and start order, wait objects
    (futexes) by address or by their offset in the page and their waiters. Each row is a thread,
    a pool, a wait object or the idle time, with its contribution to the change in wall time;
    the first line says it in words.
    """
    from scalestack.analysis.compare import compare
    from scalestack.errors import UserError
    from scalestack.fileio import atomic_write

    if len(paths) < 2:
        raise UserError("compare needs two traces (the baseline first): scalestack compare A B")
    def load(p):
        from scalestack.trace.aggregate import AggregateRecording, is_aggregate

        return AggregateRecording.load(p) if is_aggregate(p) else scalestack.load(p)

    base = load(paths[0])
    results = [compare(base, load(p), labels=(paths[0], p)) for p in paths[1:]]
    if output:
        import json

        from scalestack.results import jsonable

        data = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        atomic_write(output, json.dumps(jsonable(data), indent=2, allow_nan=False).encode())
        click.echo(f"scalestack: wrote {output}", err=True)
    if as_json:
        if len(results) == 1:
            click.echo(results[0].to_json())
        else:
            import json

            from scalestack.results import jsonable

            click.echo(json.dumps(jsonable([r.to_dict() for r in results]), indent=2, allow_nan=False))
        return
    for res in results:
        if len(results) > 1:
            click.echo(f"{res.labels[1]} against {res.labels[0]}:")
        print_compare(res, top)


def print_compare(res, top: int = 12) -> None:
    from rich.console import Console

    from scalestack.report import Section
    from scalestack.report.terminal import section_table
    from scalestack.units import format_ns

    click.echo(res.summary())
    rows = res.rows()[: top or None]
    table = []
    for r in rows:
        table.append({k: ("" if v is None else format_ns(v) if k.endswith("_ns") else
                          f"{v:.0f}%" if k.endswith("_pct") else v) for k, v in r.items()})
    cols = [("rank", "#"), ("kind", "kind"), ("label", "thread / pool / wait object"),
            ("contribution_ns", "wall time"), ("share_of_change_pct", "of change"),
            ("criticality_change_ns", "Δ criticality"), ("running_change_ns", "Δ running"),
            ("runnable_change_ns", "Δ runnable"), ("wait_change_ns", "Δ wait")]
    Console(width=max(Console().width, 140)).print(section_table(Section("compare", "compare", table=table,
                                                                         columns=cols)))
