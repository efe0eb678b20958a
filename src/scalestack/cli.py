"""The `scalestack` command. Each subcommand lives in its own module under
`scalestack.commands` and exposes a click command named `command`; this file only finds them
and turns user errors into one line on stderr with a non-zero exit status.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import pkgutil
import sys

import click

import scalestack.commands
from scalestack import __version__
from scalestack.errors import UserError


class _Group(click.Group):
    """Subcommands discovered from `scalestack.commands`, loaded only when listed or run."""

    def _modules(self) -> dict[str, str]:
        found = {}
        for info in pkgutil.iter_modules(scalestack.commands.__path__):
            if not info.name.startswith("_"):
                found[info.name.rstrip("_").replace("_", "-")] = f"scalestack.commands.{info.name}"
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._modules())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = self._modules().get(name)
        if module is None:
            return None
        return importlib.import_module(module).command


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scalestack")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Why doesn't your multi-threaded program get faster with more cores?

    Record a program with `scalestack record -- CMD`, then `scalestack report`.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def small_pages() -> None:
    """NumPy's big arrays in 4 KiB pages unless NUMPY_MADVISE_HUGEPAGE says otherwise: the
    commands fill fresh arrays once and stream over them, where a huge page's fault costs more than
    its TLB saves (1 GB of fresh array: 1.7-2.4 s with huge pages, 0.45-0.56 s without, on a
    2-vCPU Firecracker VM; `import` of 10^7 events: 0.6 s less system time)."""
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        try:
            from numpy._core import multiarray
        except ImportError:  # NumPy 1.x
            from numpy.core import multiarray
        getattr(multiarray, "_set_madvise_hugepage", lambda _on: None)(False)


COMPILING = ("scalestack: compiling its passes for this machine: once after an install or upgrade "
             "(a few minutes in all); later runs load them in a fraction of a second")


def notice_compiles() -> None:
    """One line on a terminal's stderr the first time this process compiles (not loads from
    numba's cache) a function: a first run after an install compiles for up to a minute before any
    output, and would look hung (like a progress bar, not written where output is captured). numba
    is not imported for it (`--help` stays quick): the listener goes in once something imports numba."""
    if not sys.stderr.isatty():
        return
    if "numba" in sys.modules:
        _listen()
    elif not any(isinstance(f, _AfterNumba) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumba())


class _Around(importlib.abc.MetaPathFinder):
    """One module's import, with `before` called ahead of its code and `after` once it has run."""

    def __init__(self, name: str, before=None, after=None):
        self.name, self.before, self.after = name, before, after

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run, before, after = spec.loader.exec_module, self.before, self.after

        def exec_module(module):
            undo = before() if before else None
            try:
                run(module)
            finally:
                if undo:
                    undo()
            if after:
                after()
        spec.loader.exec_module = exec_module
        return spec


class _AfterNumba(_Around):
    def __init__(self):
        super().__init__("numba", after=_listen)


def skip_blas_probe() -> None:
    """numba's array library imports SciPy's linear algebra (0.1 s of every command's start) only
    to choose how np.cov and np.correlate multiply in compiled code; no pass of scalestack calls
    them, so that import is made to fail while numba's library loads (numba then uses its own loop).
    SciPy stays importable afterwards (the phase clustering uses it)."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    if any(isinstance(f, _Around) and f.name == "numba.np.arraymath" for f in sys.meta_path):
        return

    def block():
        sys.modules["scipy.linalg"] = None  # its import raises ImportError

        def undo():
            if "scipy.linalg" in sys.modules and sys.modules["scipy.linalg"] is None:
                del sys.modules["scipy.linalg"]
        return undo
    sys.meta_path.insert(0, _Around("numba.np.arraymath", before=block))


def _listen() -> None:
    global _listening
    if _listening:
        return
    _listening = True
    from numba.core import event

    class Notice(event.Listener):
        said = False

        def on_start(self, _event) -> None:
            if not self.said:
                self.said = True
                print(COMPILING, file=sys.stderr, flush=True)

        def on_end(self, _event) -> None:
            pass

    event.register("numba:compile", Notice())


_listening = False


def prepare_process() -> None:
    """What every command's process sets before its work (also `make demo`'s)."""
    small_pages()
    skip_blas_probe()
    notice_compiles()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    prepare_process()
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="scalestack", standalone_mode=False)
    except UserError as exc:
        if debug:
            raise
        click.echo(f"scalestack: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("scalestack: aborted", err=True)
        sys.exit(130)
    except SystemError as exc:  # Ctrl-C while a compiled pass ran without the GIL: numba returns with the
        if debug or not isinstance(exc.__cause__, KeyboardInterrupt):  # interrupt set, and Python chains it
            raise
        click.echo("scalestack: aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:  # a mistyped option or value: one line, as every other error
        if debug:
            raise
        path = exc.ctx.command_path if exc.ctx is not None else "scalestack"
        click.echo(f"scalestack: error: {exc.format_message().rstrip('.')}; see `{path} --help`", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("scalestack: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
