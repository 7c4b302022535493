"""A reader that holds the published warehouse open read-only while the pipeline runs.

Usage: python reader_process.py WAREHOUSE STOP_FILE. Prints "ready" once connected, then
queries through the held connection and through fresh connections until STOP_FILE exists;
prints the counts and exits 0, or exits 1 on the first error.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import duckdb


def main() -> int:
    warehouse, stop = Path(sys.argv[1]), Path(sys.argv[2])
    held = duckdb.connect(str(warehouse), read_only=True)
    print("ready", flush=True)
    held_queries = fresh_queries = 0
    try:
        while not stop.exists():
            held.execute("SELECT count(*) FROM flag_environment_metrics").fetchall()
            held_queries += 1
            fresh = duckdb.connect(str(warehouse), read_only=True)
            try:
                fresh.execute("SELECT sum(evaluations) FROM flag_environment_metrics").fetchall()
                fresh_queries += 1
            finally:
                fresh.close()
            time.sleep(0.01)
    except Exception as exc:  # noqa: BLE001 - any failure is the test's finding
        print(f"error {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        held.close()
    print(f"held={held_queries} fresh={fresh_queries}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
