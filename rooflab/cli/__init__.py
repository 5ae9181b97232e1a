"""The `rooflab` command. Thin: parse, call the core, a study or the lab, render (report/).
One module per command group: analytic (specs, cost, roofline, layer, model), measured
(ceilings, fusion, attention, collectives, generate, analyze), lab (lab, check, compare)."""
from __future__ import annotations

import sys

import typer

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions

from rooflab.cli import analytic, lab, measured  # noqa: F401 - each registers its commands
from rooflab.cli import inputs as I
from rooflab.cli.common import app
from rooflab.errors import RooflabError


def main(argv: list[str] | None = None) -> int:
    """Entry point. Exit codes: 0 done, 2 bad input (one line on stderr), 130 interrupted, 1 when
    `rooflab check` finds an answer that does not hold; an unexpected error is one line too
    (ROOFLAB_DEBUG=1 shows its traceback), also with exit code 1."""
    import logging
    import os

    # torch.compile on a machine with a CUDA toolkit but no GPU warns "No CUDA runtime is found"
    # on every compile: noise on a CPU run, so only errors of that module reach the user
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    try:
        rv = app(args=argv, prog_name="rooflab", standalone_mode=False)
    except I.Interrupted as e:
        return _interrupted(str(e))
    except KeyboardInterrupt:  # whatever the typer release does with Ctrl-C
        return _interrupted("interrupted")
    except typer.Exit as e:
        return _interrupted("interrupted") if e.exit_code == 130 else e.exit_code
    except typer.Abort:
        return _interrupted("aborted")
    except getattr(click_exceptions, "NoArgsIsHelpError", ()) as e:
        sys.stdout.write(e.format_message() + "\n")  # bare `rooflab`: help, not an error
        return 0
    except click_exceptions.ClickException as e:
        sys.stderr.write(f"rooflab: error: {e.format_message()}\n")
        return 2
    except RooflabError as e:
        sys.stderr.write(f"rooflab: error: {_first_line(e)}\n")
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("ROOFLAB_DEBUG"):
            raise
        sys.stderr.write(f"rooflab: internal error: {type(e).__name__}: {_first_line(e)} "
                         "(ROOFLAB_DEBUG=1 shows the traceback)\n")
        return 1
    # typer returns the exit code of a Ctrl-C (130) or an explicit Exit instead of raising
    if rv == 130:
        return _interrupted("interrupted")
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e).strip() else type(e).__name__


def _interrupted(message: str) -> int:
    sys.stderr.write(f"rooflab: {message}\n")
    return 130

