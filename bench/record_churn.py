"""`sfbt record` of a process that makes and ends threads without pause
(tests/programs/churn.c, about a thousand a second): the recorder's
resident memory and open descriptors every few seconds, which should stay
flat once it has seen the first threads come and go.

The descriptors are counted in two parts: the recorder keeps two open
(/proc/PID/task/TID/schedstat and syscall) for each thread of its latest
listing of /proc/PID/task, so that part follows how many threads the
program has at that moment (churn.c: the main one and up to AT_ONCE
more); the other part (its own files, the modules' files, a /proc file
read in passing) should not grow.

Run: python3 bench/record_churn.py [--seconds 60] [--every 5] [--hz 99]
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_program(directory, name):
    """tests/programs/NAME.c, compiled with SFrame data into directory."""
    program = os.path.join(directory, name)
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", program,
                    str(ROOT / "tests" / "programs" / f"{name}.c"), "-lpthread"],
                   check=True, capture_output=True)
    return program


def resident_kb(pid):
    """Process ``pid``'s resident size (VmRSS), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


#: threads churn.c runs at once besides its main thread
AT_ONCE = 4


def descriptors(pid, target):
    """(descriptors, thread descriptors, module descriptors) process
    ``pid`` holds open: all of them, those of a thread of ``target`` other
    than its main one (/proc/TARGET/task/TID/...), and those of the files
    ``target`` maps or their separate debug files (opened once a frame in
    them is first walked or named: a set bounded by the modules).  One
    closed while they are listed is not counted."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    task = re.compile(rf"/proc/{target}/task/(\d+)/")
    thread_links = [link for link in links
                    if (match := task.match(link)) and int(match[1]) != target]
    with open(f"/proc/{target}/maps") as maps:
        mapped = {line.split(None, 5)[5].strip() for line in maps if len(line.split()) > 5}
    module_links = [link for link in links
                    if link in mapped or link.startswith("/usr/lib/debug/")]
    return len(links), len(thread_links), len(module_links)


def record_churn(directory, seconds, every, hz, say=print):
    """Record the churning program for ``seconds``, calling ``say`` with
    (elapsed seconds, resident KiB, descriptors, thread descriptors, module
    descriptors, see ``descriptors``) every ``every`` seconds; returns these figures and
    `sfbt record`'s (exit status, stdout, stderr)."""
    program = build_program(directory, "churn")
    target = subprocess.Popen([program, str(seconds + 30)], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    archive = os.path.join(directory, "churn.sfbt")
    recorder = None
    try:
        assert target.stdout.readline().strip() == b"ready"
        recorder = subprocess.Popen(
            [sys.executable, "-m", "sfbt", "record", "--idle", "-p", str(target.pid),
             "--hz", str(hz), "-o", archive], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "plugin")))
        recorder.stderr.readline()  # Recording process ...: it sampled
        began = time.monotonic()
        figures = []
        while time.monotonic() - began < seconds:
            time.sleep(every - (time.monotonic() - began) % every)
            if recorder.poll() is not None:
                break
            figure = (time.monotonic() - began, resident_kb(recorder.pid),
                      *descriptors(recorder.pid, target.pid))
            figures.append(figure)
            say(*figure)
        recorder.send_signal(signal.SIGTERM)
        out, err = recorder.communicate(timeout=120)
        return figures, (recorder.returncode, out, err)
    finally:
        for process in (recorder, target):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--hz", type=float, default=99.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sfbt-churn-") as directory:
        print("seconds  resident MiB  descriptors  of threads  of modules")
        figures, (code, out, err) = record_churn(
            directory, args.seconds, args.every, args.hz,
            lambda elapsed, kb, fds, thread_fds, module_fds: print(
                f"{elapsed:7.1f}  {kb / 1024:12.1f}  {fds:11d}  {thread_fds:10d}"
                f"  {module_fds:10d}", flush=True))
        print(out.strip() or f"sfbt record ended with {code}: {err.strip()}")


if __name__ == "__main__":
    main()
