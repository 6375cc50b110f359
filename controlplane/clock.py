"""The one source of "now" for the control planes.

Everything that needs the current time calls ``clock.now()`` so tests can
freeze it (``time_machine``) or pass an explicit ``now`` to pure functions.
"""

import time


def now():
    """Current time as float epoch seconds (the control planes' unit)."""
    return time.time()
