"""Process start-up with CPython's cyclic garbage collector paused.

Starting a worker imports about 900 modules and builds the application: hundreds of thousands of
objects that live as long as the process. While they are being created the collector would walk
the growing heap again and again (its young collections every 700 allocations, its full ones as
the heap grows) and find almost nothing to free: about a tenth of a worker's start-up here. Its
later full collections would walk all of them again, under load.

So start-up runs with the collector off; when it ends, the objects made by then go to the
permanent generation (``gc.freeze``, as the CPython documentation advises before forking workers)
and the collector is turned back on: from then on it only looks at what requests create.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """Run the block with the cyclic collector off; freeze what it built and turn it back on.

    Nests: only the outermost block of a process that had the collector on freezes and re-enables.
    A process that runs with the collector off (``gc.disable()`` by its owner) keeps it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.enable()
