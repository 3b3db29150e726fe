"""A process's memory as the kernel reports it, for health figures and benchmark reports."""

from __future__ import annotations

from pathlib import Path


def memory_mb(pid: int | str = "self", field: str = "VmRSS") -> float | None:
    """`field` of /proc/<pid>/status in MiB (VmRSS now, VmHWM the peak); None when the process is gone or
    the system is not Linux."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024  # the kernel reports kB
    except OSError:
        return None
    return None
