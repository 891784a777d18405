"""Run a bench's work in a child process and measure that child's peak memory and CPU time.

Why a helper between pytest and the child: on Linux a child's ``ru_maxrss`` starts from the high-water mark
of the process that spawned it, so a child started straight from pytest (which may hold a generated table by
then) would report pytest's peak, not its own. A fresh, small interpreter (about 10 MB) starts the child,
and its ``RUSAGE_CHILDREN`` is then the child's alone. The child's stdout is discarded (DuckDB's progress
bar writes there); children report results through files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

PEAK_RSS_HELPER = """
import json, resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"returncode": code, "maxrss_kib": usage.ru_maxrss, "cpu": usage.ru_utime + usage.ru_stime}))
"""


@dataclass(frozen=True)
class ChildUsage:
    returncode: int
    peak_mb: float  # the child's peak RSS (Linux reports ru_maxrss in KiB)
    cpu_seconds: float  # user + system time of the child


def run_measured(command: list[str]) -> ChildUsage:
    """Run ``command`` under the helper and return its exit code, peak RSS and CPU time."""
    helper = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_HELPER, *command], check=True, capture_output=True, text=True
    )
    usage = json.loads(helper.stdout)
    return ChildUsage(usage["returncode"], usage["maxrss_kib"] / 1024, usage["cpu"])
