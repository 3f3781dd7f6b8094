"""Fuzzing `sfbt stack` and `sfbt record` with processes whose threads are
hard to sample (tests/programs/thread_games.c): threads made and ended
without pause, bursts of threads that exit while they are being stopped,
a thread waiting in vfork (it cannot stop until its child exits), a
thread that execs (every other thread ends, and it takes the leader's
id), and a main thread that exited while the others run on (a zombie
leader).  Each case picks a game, its threads and length, and a command
(stack, stack --thread, record at a random rate for a random time), and
runs it through bench/fuzz.py's harness (a forked child under a memory
and time limit), counted as one of its OUTCOMES.

Besides the outcomes it counts HARMS: a peak resident size over 300 MB,
and the recorder's open descriptors growing while it records (sampled
every 0.1 s, their most in the last second against their most in the
second halfway: more than DESCRIPTOR_SLACK more, and two for each thread
the game may have at once).

Run: python3 bench/fuzz_threads.py [--cases N] [--seed S]
"""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz import MEMORY_LIMIT, OUTCOMES, engine_main, run_measured  # noqa: E402
from record_churn import build_program  # noqa: E402

GAMES = ("churn", "burst", "vfork", "exec", "zombie")
#: the games whose threads live on (all but the one in vfork or exec)
LASTING = ("vfork", "exec", "zombie")
HARMS = ("memory over 300 MB", "descriptors grew")
#: descriptors a recorder may open while it records (a new mapping's file)
DESCRIPTOR_SLACK = 8


class Descriptors:
    """Samples, every 0.1 s, the open descriptors of the child this
    process forks next (run_measured's), while it runs."""

    def __init__(self, target_pid):
        self.counts = []  # (seconds since started, descriptors)
        self._others = {target_pid}
        self._done = threading.Event()
        self._began = time.monotonic()
        self._children = f"/proc/{os.getpid()}/task/{threading.get_native_id()}/children"
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._done.set()
        self._thread.join()

    def _sample(self):
        while not self._done.wait(0.1):
            try:
                with open(self._children) as stream:
                    children = [int(pid) for pid in stream.read().split()]
                child = next(pid for pid in children if pid not in self._others)
                count = len(os.listdir(f"/proc/{child}/fd"))
            except (OSError, StopIteration):
                continue
            self.counts.append((time.monotonic() - self._began, count))

    def grew(self, threads):
        """Whether the descriptors grew in the second half of the run by
        more than a process of ``threads`` threads at once explains (None
        where too little was seen to tell)."""
        if not self.counts or self.counts[-1][0] < 2.5:
            return None
        end = self.counts[-1][0]
        halfway = [n for at, n in self.counts if end / 2 - 0.5 <= at < end / 2 + 0.5]
        latest = [n for at, n in self.counts if at >= end - 1.0]
        return bool(halfway) and max(latest) - max(halfway) > DESCRIPTOR_SLACK + 2 * threads


def _case(rng, game, program, directory):
    """(outcome, harms, argv, stderr) of one case of ``game``."""
    # threads that live on are walked at each sample: dozens of them at 99
    # Hz take record longer than the harness's time limit to walk on two
    # loaded CPUs (its backlog is walked at the end), where short-lived
    # ones are mostly gone before they are copied
    count = rng.choice((1, 2, 4, 8) if game in LASTING else (1, 4, 16, 64))
    # most outlast the command (the harness's time limit, for vfork)
    seconds = rng.choice((0.3, 2, 6, 30))
    target = subprocess.Popen([program, game, str(seconds), str(count)],
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        target.stdout.readline()
        pid = str(target.pid)
        command = rng.choice(("stack", "stack-thread", "record", "record"))
        if command == "stack":
            argv = ["stack", pid]
        elif command == "stack-thread":
            tids = os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []
            argv = ["stack", pid, "--thread", rng.choice(tids or [pid])]
        else:
            argv = ["record", "--idle", "-p", pid, "--hz", str(rng.choice((10, 99, 499, 2000))),
                    "--duration", str(rng.choice((0.5, 1, 3, 4))),
                    "-o", os.path.join(directory, "recorded.sfbt")]
        with Descriptors(target.pid) as descriptors:
            outcome, stderr, peak = run_measured(argv)
    finally:
        try:
            os.killpg(target.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        target.wait()
        target.stdout.close()
    harms = []
    if peak * 1024 > MEMORY_LIMIT:
        harms.append("memory over 300 MB")
    if argv[0] == "record" and descriptors.grew(count):
        harms.append("descriptors grew")
    return outcome, harms, [game, str(count), str(seconds), *argv], stderr


def fuzz_threads(cases, seed, directory):
    """Run cases; returns ({outcome or harm: count}, the failing cases
    [(what, argv, stderr)])."""
    rng = random.Random(seed)
    program = build_program(directory, "thread_games")
    counts = dict.fromkeys(OUTCOMES + HARMS, 0)
    failures = []
    for number in range(cases):
        outcome, harms, argv, stderr = _case(rng, GAMES[number % len(GAMES)], program,
                                             directory)
        counts[outcome] += 1
        for harm in harms:
            counts[harm] += 1
        for what in ([outcome] if outcome not in ("clean", "error") else []) + harms:
            failures.append((what, argv, stderr))
    return counts, failures


def main():
    return engine_main(
        "fuzz-threads", lambda cases, seed, directory, _: fuzz_threads(cases, seed, directory))


if __name__ == "__main__":
    sys.exit(main())
