"""Debug files from the debuginfod servers that ``DEBUGINFOD_URLS`` names
(elfutils' protocol: ``GET URL/buildid/ID/debuginfo``), as GDB and
eu-stack ask them.

A download is bounded in size (``DEBUGINFOD_MAXSIZE``, default 1 GiB) and
time (``DEBUGINFOD_TIMEOUT`` seconds without progress, default 5;
``DEBUGINFOD_MAXTIME`` seconds in all, default 300), kept under the
private cache (downloads.py), and used only when its build id is the one
asked for.  A build id no server had is not asked for again for ten
minutes (elfutils' default too).  A server that fails says so in one line,
once a run; one that cannot be reached is not asked again that run."""

import http.client
import os
import sys
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
        return (f"debuginfod {printable(server)}: {text}"
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


def _opener():
    """urllib's HTTP and HTTPS handling (proxies and redirects included),
    and no other scheme.  A Python without ssl (as some debuggers embed)
    has no HTTPS: an https:// server then fails in one line."""
    opener = urllib.request.OpenerDirector()
    https = getattr(urllib.request, "HTTPSHandler", None)
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(),
                    urllib.request.HTTPHandler(), https and https(),
                    urllib.request.HTTPDefaultErrorHandler(),
                    urllib.request.HTTPRedirectHandler(),
                    urllib.request.HTTPErrorProcessor()):
        if handler is not None:
            opener.add_handler(handler)
    return opener


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
    """The servers of DEBUGINFOD_URLS, asked in turn for one build id's
    debug file."""

    def __init__(self, servers, timeout=DEFAULT_TIMEOUT, max_size=DEFAULT_MAX_SIZE,
                 max_time=DEFAULT_MAX_TIME):
        self.servers = list(servers)
        self.timeout = timeout
        self.max_size = max_size
        self.max_time = max_time
        self._opener = _opener()
        self._unreachable = set()
        self._told = set()  # servers that said something this run
        self._cache_failed = False

    @classmethod
    def from_environment(cls, environ=os.environ):
        """The servers the environment names, or None when it names none."""
        servers = []
        for url in environ.get("DEBUGINFOD_URLS", "").split():
            if _usable(url):
                servers.append(url.rstrip("/"))
            else:
                say(f"DEBUGINFOD_URLS: {printable(url)} is not an http:// or https:// "
                    "URL; left out")
        if not servers:
            return None
        return cls(servers, _setting(environ, "DEBUGINFOD_TIMEOUT", DEFAULT_TIMEOUT),
                   _setting(environ, "DEBUGINFOD_MAXSIZE", DEFAULT_MAX_SIZE),
                   _setting(environ, "DEBUGINFOD_MAXTIME", DEFAULT_MAX_TIME))

    def debug_file(self, build_id, what):
        """The path of the debug file of ``build_id`` (lower-case hex),
        downloaded now or before, or None.  ``what`` names the file it is
        for in messages."""
        if self._cache_failed:
            return None
        path, found = downloads.kept(build_id, self.max_size)
        if found == build_id:
            return path
        if downloads.recent_miss(build_id, MISS_SECONDS):
            return None
        failures = []  # said only when no server has the file
        for server in self.servers:
            if server in self._unreachable:
                continue
            try:
                path = self._fetch(server, build_id)
            except DownloadFailed as failure:
                if failure.unreachable:
                    self._unreachable.add(server)
                    self._tell(server, failure.line(server, what, build_id))
                else:
                    failures.append((server, failure))
                continue
            if path is None:  # the cache, not the server
                self._cache_failed = True
                say(f"debuginfod: cannot keep downloads in "
                    f"{printable(downloads.directory())}; not downloading")
            return path
        for server, failure in failures:
            self._tell(server, failure.line(server, what, build_id))
        downloads.remember_miss(build_id)
        return None

    def _tell(self, server, line):
        """Say line, when the server has not said anything yet this run."""
        if server not in self._told:
            self._told.add(server)
            say(line)

    def _fetch(self, server, build_id):
        """The path of the file ``server`` sends for ``build_id``, kept in
        the cache; None when the cache cannot keep it.  Raises
        DownloadFailed."""
        request = urllib.request.Request(
            f"{server}/buildid/{build_id}/debuginfo",
            headers={"User-Agent": f"sfbt/{__version__}",
                     "X-DEBUGINFOD-MAXSIZE": str(self.max_size)})
        deadline = time.monotonic() + self.max_time
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > self.max_size:
                    raise self.too_large()
                if not downloads.store(build_id, _Bounded(self, response, deadline),
                                       self.max_size):
                    return None
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 404:
                raise DownloadFailed("no debug info for {file}") from None
            if error.code == 406:  # larger than X-DEBUGINFOD-MAXSIZE, as elfutils reads it
                raise self.too_large() from None
            phrase = http.client.responses.get(error.code)
            raise DownloadFailed(f"HTTP {error.code}" + (f" ({phrase})" if phrase else "")
                                 + " for {file}") from None
        except urllib.error.URLError as error:
            raise DownloadFailed(_reason(error.reason, self.timeout), True) from None
        except (ValueError, http.client.InvalidURL) as error:  # a redirect's Location
            raise DownloadFailed(f"sent a URL sfbt cannot use ({printable(str(error))})",
                                 True) from None
        except (http.client.HTTPException, ConnectionError, TimeoutError) as error:
            raise DownloadFailed(_reason(error, self.timeout), True) from None
        path, found = downloads.kept(build_id, self.max_size)
        if found != build_id:
            downloads.discard(build_id)
            raise DownloadFailed(f"sent a file whose build id is {found} for {{file}}; "
                                 "not used" if found else "sent a file that is not ELF "
                                 "with a build id for {file}; not used")
        return path

    def too_large(self):
        return DownloadFailed("the debug file of {file} is larger than "
                              f"{self.max_size} bytes (DEBUGINFOD_MAXSIZE); not used")


class _Bounded:
    """The body of a server's answer, read within the size and time
    bounds; what goes wrong raises DownloadFailed (never an OSError: the
    cache takes those for its own)."""

    def __init__(self, client, response, deadline):
        self.client = client
        self.response = response
        self.deadline = deadline
        self.size = 0

    def read(self, size):
        client = self.client
        try:
            chunk = self.response.read(min(size, CHUNK))
        except (OSError, http.client.HTTPException) as error:
            raise DownloadFailed(_reason(error, client.timeout), True) from None
        self.size += len(chunk)
        if self.size > client.max_size:
            raise client.too_large()
        if time.monotonic() > self.deadline:
            raise DownloadFailed("the download of {file} took longer than "
                                 f"{client.max_time} s (DEBUGINFOD_MAXTIME); not used")
        return chunk


def _reason(error, timeout):
    """Why a server could not be read, in a few words."""
    if isinstance(error, TimeoutError):
        return f"no answer in {timeout} s (DEBUGINFOD_TIMEOUT)"
    if isinstance(error, OSError) and error.strerror:
        return printable(error.strerror)
    if isinstance(error, http.client.HTTPException):
        return f"broken HTTP answer ({type(error).__name__})"
    return printable(str(error) or type(error).__name__)
