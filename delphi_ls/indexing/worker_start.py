"""An index worker's first code, run before anything else is imported in it (``workers._preparation_data`` names
this module as the worker's main module): Ctrl-C is the parent's to handle.

A terminal's Ctrl-C goes to the whole process group, workers included. The initializer ignored it, but only
after the worker had imported what it runs (numpy, tree-sitter: a second or more), and a Ctrl-C in that time
printed each worker's `KeyboardInterrupt` traceback above "delphi: interrupted" (5 runs in 6 of `delphi index`
interrupted 0.8-2 s after its start, a newcomer's first use, session 44). The worker starts with SIGINT and
SIGTERM blocked (``workers._signals_held``, the mask its parent had while starting it): Ctrl-C is ignored here,
then both are unblocked, and a SIGTERM that came meanwhile (the parent stopping its pool) ends the worker now.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
if hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
