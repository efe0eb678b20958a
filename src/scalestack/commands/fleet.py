"""`scalestack fleet`: many recordings, one query (DuckDB embedded, or Spark)."""

from __future__ import annotations

import click

from scalestack.errors import UserError

QUERY_CHOICES = ["all", "parallelism", "criticality", "locks", "windows"]


@click.command()
@click.argument("root", metavar="DIR")
@click.argument("recordings", metavar="[RECORDING ...]", nargs=-1)
@click.option("--host", help="Host of the RECORDINGs added (default: their metadata, else this machine).")
@click.option("--program", help="Program of the RECORDINGs added (default: the recorded binary's name).")
@click.option("--date", "date_", metavar="YYYY-MM-DD", help="Date of the RECORDINGs added (default: when recorded).")
@click.option("--window", default="1s", show_default=True, metavar="DURATION",
              help="Window of the per-thread rows of traces added (aggregate recordings keep theirs).")
@click.option("--generate", type=int, metavar="N", help="Add N synthetic recordings from the workload simulator.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --generate.")
@click.option("--compact", is_flag=True, help="Merge each partition's files into one (faster queries).")
@click.option("--query", "query_", type=click.Choice(QUERY_CHOICES), default="all", show_default=True,
              help="Which of the built-in questions to answer.")
@click.option("--sql", help="Your own SQL over the views recordings, threads and waits.")
@click.option("--worst", type=int, default=3, show_default=True, help="Worst windows per program and host.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL (with --engine spark).")
@click.option("--json", "as_json", is_flag=True, help="Print the answers as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Only add recordings; answer nothing.")
def command(root, recordings, host, program, date_, window, generate, seed, compact, query_, sql, worst, engine,
            master, as_json, quiet):
    """Add recordings to the fleet dataset DIR (hive-partitioned Parquet: host=/program=/date=),
    then answer per program and host: parallelism, criticality of each role and pool, wait time
    per lock and the worst windows; or your own --sql.

    \b
    scalestack fleet fleet/ run1.trace run2.parquet --host web1   # add, then answer
    scalestack fleet fleet/ --sql "SELECT program, SUM(crit_ns) FROM threads GROUP BY program"
    scalestack fleet fleet/ --engine spark --master spark://head:7077
    """
    import json

    from scalestack.fleet import TITLES, Fleet, export
    from scalestack.units import parse_duration_ns

    if recordings:
        written = export(recordings, root, host=host, program=program, date=date_,
                         window_ns=parse_duration_ns(window, what="--window"))
        click.echo(f"scalestack: added {len(recordings)} recordings to {root} ({len(written)} files)", err=True)
    if generate:
        from scalestack.fleet.synthetic import generate as gen

        if generate < 0:
            raise UserError("--generate must be a positive count")
        out = gen(root, generate, seed=seed)
        click.echo(f"scalestack: added {out['recordings']} synthetic recordings to {root} ({out['files']} files)",
                   err=True)
    if compact:
        from scalestack.fleet.schema import compact as compact_files

        before, after = compact_files(root)
        click.echo(f"scalestack: merged {before} files into {after}", err=True)
    if quiet:
        return

    def skipped(line: str) -> None:
        click.echo(f"scalestack: warning: {line}", err=True)

    with Fleet(root, engine, master=master, on_skip=skipped) as fleet:
        if sql:
            answers = {"sql": fleet.sql(sql)}
        else:
            names = QUERY_CHOICES[1:] if query_ == "all" else [query_]
            answers = {n: fleet.query(n, worst) for n in names}
    if as_json:
        from scalestack.results import jsonable

        click.echo(json.dumps(jsonable({k: df.to_dict(orient="records") for k, df in answers.items()}), indent=2,
                              allow_nan=False))
        return
    _print(answers, TITLES)


def _print(answers, titles) -> None:
    from rich.console import Console

    from scalestack.report import Section
    from scalestack.report.terminal import section_table
    from scalestack.units import format_ns

    console = Console(width=max(Console().width, 140))
    for key, df in answers.items():
        rows = df.to_dict(orient="records")
        console.print(f"[bold]{titles.get(key, 'Query')}[/bold] ({len(rows)} rows)")
        if not rows:
            continue
        shown = []
        for r in rows[:200]:
            out = {}
            for k, v in r.items():
                if v is None:
                    out[k] = ""
                elif ("_ns" in k and not k.endswith("start_ns")) and isinstance(v, (int, float)):  # (wait_ns_per_recording)
                    out[k] = format_ns(v)
                elif isinstance(v, float):
                    out[k] = f"{v:.3g}"
                else:
                    out[k] = v
            shown.append(out)
        cols = [(k, k.replace("_ns", "").replace("_", " ")) for k in rows[0]]
        console.print(section_table(Section(key, key, table=shown, columns=cols)))
        if len(rows) > 200:
            console.print(f"... {len(rows) - 200} more rows (use --json for all)")
