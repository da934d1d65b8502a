"""How the multi-rank interop scripts end, and what they do when they hang.

watch_for_hang(): from here on, a rank still running after `seconds` prints every thread's Python
stack to stderr and exits 1 (faulthandler), before the test's own timeout kills it silently.

leave(failures): flushes what the rank printed and ends the process at once, with status 1 if any
check failed, else 0. No collective, no process group teardown, no interpreter finalization:
twice in CI (2026-11), an interop test hung after both ranks had printed their checks, once in a
closing barrier and once in destroy_process_group or the interpreter's teardown of the Gloo
group's threads (docs/reliability.md, "Flaky tests"). What these scripts test is done by then.
"""
import faulthandler
import os
import sys


def watch_for_hang(seconds=120):
    faulthandler.dump_traceback_later(seconds, exit=True)


def leave(failures):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failures else 0)
