"""Fuzzing the debuginfod client with hostile servers: `sfbt cbf decode`
of an archive whose images' debug files are asked for by build id, with
DEBUGINFOD_URLS naming 1 to 24 servers on 127.0.0.1 that each, at random,
trickle one byte a second, stall (accept and never answer), lie (a
Content-Length longer or shorter than the body, bytes that are not ELF,
an ELF file of another build id, a body far over DEBUGINFOD_MAXSIZE, with
and without a length), redirect (to another server, to themselves, to a
scheme urllib must not follow, to a URL with a password), answer 404 or
500 slowly, or send a broken status line.  Some URLs carry a user and a
password.

Each case runs in bench/fuzz.py's forked child (memory and time limits;
outcomes clean/error/traceback/hang/blowup) with DEBUGINFOD_MAXTIME 2 s
and DEBUGINFOD_TIMEOUT 1 s, so the time limit (10 s) is a hang well past
any deadline; a harm is a password on the output.  The servers run in
threads of this process (loopback only, every loop bounded; a case's
leftover answers stop when the next case begins).

Run: python3 bench/fuzz_servers.py [--cases N] [--seed S]
"""

import http.server
import json
import os
import random
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz  # noqa: E402

BEHAVIOURS = ("trickle", "stall", "long-length", "short-length", "not-elf", "other-build",
              "huge", "huge-unsized", "redirect", "redirect-self", "redirect-file",
              "redirect-password", "slow-404", "slow-500", "broken-status")
SERVERS = 24
PASSWORD = "pw-f0r-fuzz"
MAX_SIZE = 1 << 20
HUGE = 8 << 20  # bytes a huge answer sends at most
SETTINGS = {"DEBUGINFOD_MAXTIME": "2", "DEBUGINFOD_TIMEOUT": "1",
            "DEBUGINFOD_MAXSIZE": str(MAX_SIZE)}


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers as the server's behaviour for the current case says; stops
    (every loop is bounded) when a later case begins."""

    def do_GET(self):
        server = self.server
        case = server.case
        server.requests += 1
        try:
            getattr(self, "_" + server.behaviour.replace("-", "_"))(server, case)
        except OSError:  # the client hung up
            pass

    def _current(self, case):
        return self.server.case == case

    def _body(self, body, length=None):
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self, server, case):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(20):
            if not self._current(case):
                return
            self.wfile.write(b"\x7f")
            self.wfile.flush()
            time.sleep(1)

    def _stall(self, server, case):
        for _ in range(20):
            if not self._current(case):
                return
            time.sleep(0.5)

    def _long_length(self, server, case):
        self._body(server.elf[:100], len(server.elf))

    def _short_length(self, server, case):
        self._body(server.elf, 64)

    def _not_elf(self, server, case):
        self._body(server.noise, len(server.noise))

    def _other_build(self, server, case):
        self._body(server.elf, len(server.elf))

    def _huge(self, server, case):
        self._huge_body(case, HUGE)

    def _huge_unsized(self, server, case):
        self._huge_body(case, None)

    def _huge_body(self, case, length):
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(1 << 40))
        self.end_headers()
        block = b"\0" * (1 << 16)
        for _ in range(HUGE // len(block)):
            if not self._current(case):
                return
            self.wfile.write(block)

    def _redirect_to(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _redirect(self, server, case):
        self._redirect_to(server.elsewhere + self.path)

    def _redirect_self(self, server, case):
        self._redirect_to(self.path)

    def _redirect_file(self, server, case):
        self._redirect_to("file:///etc/passwd")

    def _redirect_password(self, server, case):
        self._redirect_to(server.elsewhere.replace("//", f"//u:{PASSWORD}@") + self.path)

    def _slow_404(self, server, case):
        time.sleep(0.5)
        self.send_error(404)

    def _slow_500(self, server, case):
        time.sleep(0.5)
        self.send_error(500)

    def _broken_status(self, server, case):
        self.wfile.write(b"HTTP/1.1 2x0 \xff\r\n\r\n")

    def log_message(self, *_):
        pass


def start_servers(elf, rng):
    """SERVERS servers on 127.0.0.1 in threads of this process."""
    servers = []
    for _ in range(SERVERS):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
        server.daemon_threads = True
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        server.elf, server.noise = elf, fuzz.hostile_bytes(rng, 4096)
        server.case, server.behaviour, server.elsewhere = 0, "slow-404", server.url
        server.requests = 0
        threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
        servers.append(server)
    return servers


def stop_servers(servers):
    for server in servers:
        server.case = -1
        server.shutdown()
        server.server_close()


def fuzz_servers(cases, seed, directory, report=None):
    """Run cases; returns {outcome: count, "harm": count, "slowest": s,
    "requests": the servers' count} and the failing cases [(outcome,
    urls, stderr)]."""
    rng = random.Random(seed)
    archive = os.path.join(directory, "seed.sfbt")
    with open(archive, "wb") as stream:
        stream.write(fuzz.archive_seed()[0])
    servers = start_servers(fuzz.elf_seeds()[0], rng)
    counts = dict.fromkeys(fuzz.OUTCOMES[:5], 0)
    counts.update(harm=0, slowest=0.0)
    failures = []
    saved = {name: os.environ.get(name) for name in [*SETTINGS, "DEBUGINFOD_URLS",
                                                     "XDG_CACHE_HOME"]}
    try:
        for case in range(1, cases + 1):
            chosen = rng.sample(servers, rng.randint(1, SERVERS))
            urls = []
            for server in chosen:
                server.case, server.behaviour = case, rng.choice(BEHAVIOURS)
                server.elsewhere = rng.choice(servers).url
                urls.append(server.url.replace("//", f"//user:{PASSWORD}@")
                            if rng.random() < 0.3 else server.url)
            cache = os.path.join(directory, f"cache{case}")
            os.environ.update(SETTINGS, DEBUGINFOD_URLS=" ".join(urls), XDG_CACHE_HOME=cache)
            began = time.monotonic()
            outcome, stderr = fuzz.run_case(["cbf", "decode", archive])
            counts["slowest"] = max(counts["slowest"], round(time.monotonic() - began, 1))
            counts[outcome] += 1
            harmed = PASSWORD in stderr
            counts["harm"] += harmed
            if outcome not in ("clean", "error") or harmed:
                failures.append(("harm" if harmed else outcome, urls, stderr))
            shutil.rmtree(cache, ignore_errors=True)
            if report and case % report == 0:
                print(f"{case} cases: {json.dumps(counts)}", flush=True)
        counts["requests"] = sum(server.requests for server in servers)
    finally:
        stop_servers(servers)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return counts, failures


def main():
    return fuzz.engine_main(
        "fuzz-servers", lambda cases, seed, directory, _: fuzz_servers(cases, seed, directory, report=20))


if __name__ == "__main__":
    sys.exit(main())
