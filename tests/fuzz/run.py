"""Fuzz every parser for longer than the suite does: `python -m tests.fuzz.run --minutes 30`.

Runs tests/fuzz again and again under Hypothesis' `long` profile (KOPFSCHED_FUZZ_EXAMPLES
examples per parser and run, fresh random seeds each run) until the time is up, and stops at
the first failure with Hypothesis' report (the falsifying example, to keep as an `@example`).
Exit status 0 when every run passed."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to fuzz (default: 10)")
    parser.add_argument("--examples", type=int, default=2000, help="examples per parser and run (default: 2000)")
    parser.add_argument("-k", default="", help="only the tests matching this pytest -k expression")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + 60 * args.minutes
    env = {**os.environ, "KOPFSCHED_FUZZ_PROFILE": "long", "KOPFSCHED_FUZZ_EXAMPLES": str(args.examples)}
    runs = 0
    while time.monotonic() < deadline:
        runs += 1
        command = [sys.executable, "-m", "pytest", str(HERE), "-q", "-x", "-p", "no:cacheprovider",
                   "-W", "ignore::DeprecationWarning", *(["-k", args.k] if args.k else [])]
        result = subprocess.run(command, env=env, check=False)
        if result.returncode != 0:
            print(f"fuzz run {runs} failed (see above)", file=sys.stderr)
            return 1
    print(f"{runs} fuzz runs of {args.examples} examples per parser passed in {args.minutes:g} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
