"""Functions the worker relies on, bound when it starts, before any candidate code runs.

Replacing ``time.perf_counter`` or ``threading.active_count`` later does not affect the worker.
"""

import sys
import threading
import time

perf_counter = time.perf_counter
active_count = threading.active_count
gettrace = sys.gettrace
getprofile = sys.getprofile
