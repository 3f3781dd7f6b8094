"""Debug files from the debuginfod servers that ``DEBUGINFOD_URLS`` names
(elfutils' protocol: ``GET URL/buildid/ID/debuginfo``), as GDB and
eu-stack ask them.

The servers are asked at once, each in a thread; the first that sends
the file asked for wins and the others are cut off.  A download is
bounded in size (``DEBUGINFOD_MAXSIZE``, default 1 GiB) and time
(``DEBUGINFOD_TIMEOUT`` seconds without progress, default 5;
``DEBUGINFOD_MAXTIME`` seconds in all, default 300: one deadline for
all the servers, at which a connection still open is shut), read into
an unnamed temporary file, used only when its build id is the one asked
for, and then kept in the private cache (downloads.py) and handed on
open (files.OpenedPath).  A build id no server had is not asked for
again for ten minutes (elfutils' default too).  A server that fails says
so in one line, once a run; one that cannot be reached or ran out the
deadline is not asked again that run.  A URL's user and password
(``https://user:pass@host/``) are sent as HTTP Basic authentication, as
curl sends them, and never printed (``shown``)."""

import base64
import functools
import http.client
import os
import queue
import re
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from .. import __version__
from ..printable import printable
from . import downloads

DEFAULT_TIMEOUT = 5
DEFAULT_MAX_SIZE = 1 << 30
DEFAULT_MAX_TIME = 300
#: seconds a build id that no server had is not asked for again
MISS_SECONDS = 600
CHUNK = 1 << 16
#: seconds the servers that lost are given to end once cut off
GRACE = 1.0
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/?#]*@")


def shown(url):
    """url as a message may show it: its user and password (whatever
    precedes an ``@`` in its host part) replaced by ``***``, escaped."""
    return printable(_USERINFO.sub(r"\1***@", url))


def say(message):
    """One line on standard error, as the command line's errors are."""
    print(f"sfbt: {message}", file=sys.stderr, flush=True)


class DownloadFailed(Exception):
    """What went wrong with one server, in words (``{file}`` stands for the
    file asked about); ``unreachable`` when the server is not to be asked
    again this run."""

    def __init__(self, message, unreachable=False):
        super().__init__(message)
        self.unreachable = unreachable

    def line(self, server, what, build_id):
        text = str(self).replace("{file}", f"{printable(what)} (build id {build_id})")
        return (f"debuginfod {server.shown}: {text}"
                + ("; not asked again this run" if self.unreachable else ""))


def _setting(environ, name, default):
    """A positive whole number from the environment, else the default (a
    value that is not one is said once)."""
    text = environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text, 10)
    except ValueError:
        value = 0
    if value <= 0:
        say(f"{name}={printable(text)} is not a positive whole number; using {default}")
        return default
    return value


class Server:
    """One server of DEBUGINFOD_URLS: its URL without user and password,
    the Authorization header they make (or None), and its URL as shown."""

    def __init__(self, url):
        self.shown = shown(url)
        parts = urllib.parse.urlsplit(url)
        self.authorization = None
        if "@" in parts.netloc:
            userinfo, _, host = parts.netloc.rpartition("@")
            user, _, password = userinfo.partition(":")
            pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
            self.authorization = "Basic " + base64.b64encode(pair.encode()).decode()
            parts = parts._replace(netloc=host)
        self.url = urllib.parse.urlunsplit(parts).rstrip("/")


def _usable(url):
    """Whether url is an http:// or https:// URL with a host (and a port
    that is a port)."""
    try:
        parts = urllib.parse.urlsplit(url)
        # .port raises ValueError for a port that is not one
        return parts.scheme in ("http", "https") and bool(parts.hostname) \
            and parts.port != 0
    except ValueError:
        return False


class Debuginfod:
    """The servers of DEBUGINFOD_URLS, asked at once for one build id's
    debug file."""

    def __init__(self, servers, timeout=DEFAULT_TIMEOUT, max_size=DEFAULT_MAX_SIZE,
                 max_time=DEFAULT_MAX_TIME):
        self.servers = [Server(url) for url in servers]
        self.timeout = timeout
        self.max_size = max_size
        self.max_time = max_time
        self._unreachable = set()
        self._told = set()  # servers that said something this run
        self._cache_failed = False

    @classmethod
    def from_environment(cls, environ=os.environ):
        """The servers the environment names, or None when it names none."""
        servers = []
        for url in environ.get("DEBUGINFOD_URLS", "").split():
            if _usable(url):
                servers.append(url)
            else:
                say(f"DEBUGINFOD_URLS: {shown(url)} is not an http:// or https:// "
                    "URL; left out")
        if not servers:
            return None
        return cls(servers, _setting(environ, "DEBUGINFOD_TIMEOUT", DEFAULT_TIMEOUT),
                   _setting(environ, "DEBUGINFOD_MAXSIZE", DEFAULT_MAX_SIZE),
                   _setting(environ, "DEBUGINFOD_MAXTIME", DEFAULT_MAX_TIME))

    def debug_file(self, build_id, what):
        """The debug file of ``build_id`` (lower-case hex), downloaded now
        or before, as a files.OpenedPath, or None.  ``what`` names the
        file it is for in messages."""
        if self._cache_failed:
            return None
        path, _ = downloads.kept(build_id, self.max_size)
        if path is not None:
            return path
        if downloads.recent_miss(build_id, MISS_SECONDS):
            return None
        servers = [s for s in self.servers if s.url not in self._unreachable]
        winner, failures = self._race(servers, build_id)
        for server, failure in failures:
            if failure.unreachable:
                self._unreachable.add(server.url)
                self._tell(server, failure.line(server, what, build_id))
        if winner is None:
            for server, failure in failures:
                self._tell(server, failure.line(server, what, build_id))
            downloads.remember_miss(build_id)
            return None
        path = downloads.keep(build_id, winner, self.max_size)
        if path is None:
            winner.close()
            self._cache_failed = True
            say(f"debuginfod: cannot keep downloads in "
                f"{printable(downloads.directory())}; not downloading")
        return path

    def _race(self, servers, build_id):
        """(the open file of the first server to send the debug file of
        build_id, or None; [(server, DownloadFailed)] of those that failed
        before it), each server asked in a thread, all within one
        deadline; the others are cut off."""
        deadline = time.monotonic() + self.max_time
        answers = queue.Queue()
        transfers = [_Transfer(self, server, build_id, deadline) for server in servers]
        threads = [threading.Thread(target=transfer.run, args=(answers,), daemon=True,
                                    name="sfbt debuginfod") for transfer in transfers]
        for thread in threads:
            thread.start()
        winner, failures, waiting = None, [], set(transfers)
        try:
            while waiting and winner is None:
                try:
                    transfer, outcome = answers.get(
                        timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                waiting.discard(transfer)
                if isinstance(outcome, DownloadFailed):
                    failures.append((transfer.server, outcome))
                else:
                    winner = outcome
        finally:  # an interrupt (^C in a debugger) too
            for transfer in transfers:
                transfer.cancel()
        if winner is not None:
            failures += _failed_meanwhile(threads, answers)
        if winner is None:
            failures += [(transfer.server, self.too_slow()) for transfer in waiting]
        return winner, failures

    def _tell(self, server, line):
        """Say line, when the server has not said anything yet this run."""
        if server.url not in self._told:
            self._told.add(server.url)
            say(line)

    def too_large(self):
        return DownloadFailed("the debug file of {file} is larger than "
                              f"{self.max_size} bytes (DEBUGINFOD_MAXSIZE); not used")

    def too_slow(self):
        return DownloadFailed("no whole answer for {file} in "
                              f"{self.max_time} s (DEBUGINFOD_MAXTIME)", True)


def _failed_meanwhile(threads, answers):
    """[(server, DownloadFailed)] of the transfers that failed on their
    own while another won (a server that refused the connection), given
    GRACE seconds to end once cut off."""
    grace = time.monotonic() + GRACE
    for thread in threads:
        thread.join(max(0.0, grace - time.monotonic()))
    failures = []
    while True:
        try:
            transfer, outcome = answers.get_nowait()
        except queue.Empty:
            return failures
        if isinstance(outcome, DownloadFailed):
            failures.append((transfer.server, outcome))
        else:
            outcome.close()


class _Cancelled(Exception):
    """The transfer was cut off: another server won, or time ran out."""


class _Transfer:
    """One server's download of one debug file, run in its own thread;
    cancel() shuts its connections, so that a read blocked on a server
    that trickles ends."""

    def __init__(self, client, server, build_id, deadline):
        self.client = client
        self.server = server
        self.build_id = build_id
        self.deadline = deadline
        self._lock = threading.Lock()
        self._sockets = []
        self.cancelled = False

    def run(self, answers):
        """Put (self, the open verified file or a DownloadFailed) in
        answers; nothing when cut off."""
        try:
            outcome = self._fetch()
        except DownloadFailed as failure:
            outcome = failure
        except _Cancelled:
            return
        answers.put((self, outcome))

    def track(self, sock):
        with self._lock:
            self._sockets.append(sock)
            if self.cancelled:
                _shut(sock)

    def cancel(self):
        with self._lock:
            self.cancelled = True
            for sock in self._sockets:
                _shut(sock)

    def _fetch(self):
        """The open temporary file holding what the server sent for the
        build id, checked.  Raises DownloadFailed or _Cancelled."""
        client = self.client
        request = urllib.request.Request(
            f"{self.server.url}/buildid/{self.build_id}/debuginfo",
            headers={"User-Agent": f"sfbt/{__version__}",
                     "X-DEBUGINFOD-MAXSIZE": str(client.max_size)})
        if self.server.authorization:  # not sent on to where it redirects
            request.add_unredirected_header("Authorization", self.server.authorization)
        try:
            body = tempfile.TemporaryFile()
        except OSError as error:
            raise DownloadFailed(f"no temporary file for {{file}}: {_reason(error, 0)}") \
                from None
        try:
            self._download(request, body)
        except BaseException:
            body.close()
            raise
        body.seek(0)
        found = downloads.build_id_of(body)
        if found != self.build_id:
            body.close()
            raise DownloadFailed(f"sent a file whose build id is {found} for {{file}}; "
                                 "not used" if found else "sent a file that is not ELF "
                                 "with a build id for {file}; not used")
        return body

    def _download(self, request, body):
        client = self.client
        try:
            with _opener(self).open(request, timeout=client.timeout) as response:
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > client.max_size:
                    raise client.too_large()
                size = 0
                while True:
                    chunk = self._read(response)
                    if not chunk:  # the end, or the connection shut by cancel()
                        if self.cancelled:
                            raise _Cancelled()
                        return
                    size += len(chunk)
                    if size > client.max_size:
                        raise client.too_large()
                    body.write(chunk)
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 404:
                raise DownloadFailed("no debug info for {file}") from None
            if error.code == 406:  # larger than X-DEBUGINFOD-MAXSIZE, as elfutils reads it
                raise client.too_large() from None
            phrase = http.client.responses.get(error.code)
            raise DownloadFailed(f"HTTP {error.code}" + (f" ({phrase})" if phrase else "")
                                 + " for {file}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError,
                ValueError) as error:
            if self.cancelled:
                raise _Cancelled() from None
            if isinstance(error, urllib.error.URLError):
                error = error.reason
            if isinstance(error, (ValueError, http.client.InvalidURL)):  # a redirect's Location
                raise DownloadFailed(f"sent a URL sfbt cannot use ({shown(str(error))})",
                                     True) from None
            raise DownloadFailed(_reason(error, client.timeout), True) from None

    def _read(self, response):
        """What the server has sent so far (read1: a server that trickles
        is not waited for to fill a chunk); DownloadFailed past the
        deadline."""
        if self.cancelled:
            raise _Cancelled()
        if time.monotonic() > self.deadline:
            raise self.client.too_slow()
        return response.read1(CHUNK)


def _shut(sock):
    """Shut a connection another thread may be reading (which then ends)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _Tracked:
    """A connection that gives its socket to its transfer (to be shut)."""

    def __init__(self, transfer, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.transfer = transfer

    def connect(self):
        super().connect()
        self.transfer.track(self.sock)


class _TrackedHTTP(_Tracked, http.client.HTTPConnection):
    pass


class _TrackedHTTPS(_Tracked, getattr(http.client, "HTTPSConnection",
                                      http.client.HTTPConnection)):
    pass


def _opener(transfer):
    """urllib's HTTP and HTTPS handling (proxies and redirects included),
    and no other scheme, over connections that transfer can cut.  A
    Python without ssl (as some debuggers embed) has no HTTPS: an
    https:// server then fails in one line."""
    class Http(urllib.request.HTTPHandler):
        def http_open(self, request):
            return self.do_open(functools.partial(_TrackedHTTP, transfer), request)

    handlers = [urllib.request.ProxyHandler(), urllib.request.UnknownHandler(), Http(),
                urllib.request.HTTPDefaultErrorHandler(),
                urllib.request.HTTPRedirectHandler(), urllib.request.HTTPErrorProcessor()]
    if hasattr(urllib.request, "HTTPSHandler"):
        class Https(urllib.request.HTTPSHandler):
            def https_open(self, request):
                return self.do_open(functools.partial(_TrackedHTTPS, transfer), request,
                                    context=self._context)
        handlers.append(Https())
    opener = urllib.request.OpenerDirector()
    for handler in handlers:
        opener.add_handler(handler)
    return opener


def _reason(error, timeout):
    """Why a server could not be read, in a few words."""
    if isinstance(error, TimeoutError):
        return f"no answer in {timeout} s (DEBUGINFOD_TIMEOUT)"
    if isinstance(error, OSError) and error.strerror:
        return printable(error.strerror)
    if isinstance(error, http.client.HTTPException):
        return f"broken HTTP answer ({type(error).__name__})"
    return shown(str(error) or type(error).__name__)
