"""Snakemake's process ends without tearing its interpreter down.

When ``snakemake`` ends, Python's finalization frees every module and object one by one: with Snakemake's modules,
its executor plugins (the SLURM plugin imports pandas) and the DAG loaded, that is 0.3–0.45 CPU-s on this host,
after the last line has been printed: a fifth of a no-op rerun, and a serial tail of every run
(``benchmarks/teardown.py``: a process that only imports Snakemake's command line and its plugins, without a DAG,
spends 0.26 CPU-s less).

:func:`install` replaces ``sys.exit`` in Snakemake's process by a function that, when Snakemake's command-line entry
(``snakemake.cli.main``, called by the ``snakemake`` script or ``python -m snakemake``) ends the process, does what
the interpreter's exit would do that anyone can see, and skips the rest:

1. it waits for the threads that are not daemons (``threading._shutdown``, as the interpreter does first);
2. it runs every ``atexit`` handler, in the usual order (Snakemake's, logging's, radrank's worker pool);
3. it flushes every Python file object still open for writing, and stdout and stderr;
4. it ends the process with the same status ``sys.exit`` would give (``os._exit``).

A rule script's process (:func:`radrank.jobs.run_script`, in a metric family's environment) ends through
:func:`end` too, once its job has run: there the teardown of torch, transformers and pandas costs 0.8–1.1 CPU-s and
as much wall time (``benchmarks/teardown.py``: a process that imports them ends after 3.4–3.9 s, after 2.6–2.7 s
without the teardown).

Anything else calling ``sys.exit`` — another caller, another thread, ``snakemake.cli.main`` called from Python (a
test, a notebook) — gets the usual ``SystemExit``. Where this Python lacks ``threading._shutdown`` or
``atexit._run_exitfuncs``, nothing is replaced.
"""

from __future__ import annotations

import sys

_MARK = "_radrank_quick_exit"


def install() -> bool:
    """Replace ``sys.exit`` in this process (idempotent). False where nothing was replaced."""
    import threading

    if getattr(sys.exit, _MARK, False):
        return True
    try:
        from snakemake import cli
    except ImportError:
        return False
    if not _supported():
        return False
    entry = cli.main.__code__
    original = sys.exit

    def exit(status=None):
        caller = sys._getframe(1)
        if caller.f_code is entry and _is_program(caller) and threading.current_thread() is threading.main_thread():
            end(status)
        original(status)

    exit.__doc__ = original.__doc__
    setattr(exit, _MARK, True)
    sys.exit = exit
    return True


def _supported() -> bool:
    """This Python has the interpreter's own steps :func:`end` takes (private functions of its standard library)."""
    import atexit
    import threading

    return callable(getattr(threading, "_shutdown", None)) and callable(getattr(atexit, "_run_exitfuncs", None))


def _is_program(frame) -> bool:
    """The command-line entry was called by the program itself (the ``snakemake`` script's or Snakemake's
    ``__main__`` module), not by other Python code."""
    outer = frame.f_back
    return outer is not None and outer.f_globals.get("__name__") == "__main__" and outer.f_code.co_name == "<module>"


def exit_status(status) -> int:
    """The process's exit status for ``sys.exit(status)``: None is 0, an int itself, anything else is printed to
    stderr and is 1."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status & 0xFF
    print(status, file=sys.stderr)
    return 1


def end(status) -> None:
    """End the process as ``sys.exit(status)`` would, less the interpreter's teardown (see the module docstring)."""
    import atexit
    import gc
    import io
    import os
    import threading

    if not _supported():
        sys.exit(status)  # this Python's exit as it is
    code = exit_status(status)
    threading._shutdown()
    atexit._run_exitfuncs()
    # a file written and never closed keeps its last bytes, as at a normal exit; by type(), which asks the object
    # nothing (isinstance reads __class__, which some modules' lazy objects answer with a warning)
    buffered = {io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair}
    for obj in gc.get_objects():
        if type(obj) in buffered:
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # noqa: BLE001 (a broken stream: as the interpreter's teardown, it is let go)
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)
