import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugin"
FIXTURES = ROOT / "tests" / "fixtures"
# Third-party conformance data, carried with its license (see its README).
CONFORMANCE = ROOT / "tests" / "conformance"

# Synthesized SFrame sections go to a cache of the test run's own, never the
# user's (the debuggers the tests start inherit this).  The user's cache
# directory still holds the PyPI debuggers (tests/debuggers.py).
os.environ.setdefault("SFBT_USER_CACHE_HOME", os.environ.get("XDG_CACHE_HOME")
                      or os.path.expanduser("~/.cache"))
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="sfbt-tests-cache-")
# No test asks the debuginfod servers of the machine it runs on (Debian can
# name one for every login): tests/test_debuginfo.py starts its own.
os.environ.pop("DEBUGINFOD_URLS", None)

if str(PLUGIN) not in sys.path:
    sys.path.insert(0, str(PLUGIN))

IN_CI = os.environ.get("CI") == "true"


def require(condition, reason):
    """Skip the test when ``condition`` is false (a tool it needs is not
    set up), except under CI=true, where that is a failure: CI never
    passes by skipping."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
    pytest.skip(reason)


def bench_module(name):
    """The module bench/NAME.py (an engine of bench/fuzz.py, a bench a test
    runs in small), imported with bench/ on the path as it runs there."""
    import importlib
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module(name)


def run_sfbt(*args, input=None):
    """Run the command line as a user would: python3 -m sfbt from a checkout."""
    env = dict(os.environ, PYTHONPATH=str(PLUGIN))
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, args)],
                          capture_output=True, text=True, env=env, input=input,
                          timeout=120)


def one_frame_archive(path, image_path):
    """Write at path an archive of one trace: one frame, at 0x400100 in an
    image whose file is image_path, mapped at 0x400000.  Returns path."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.store import MAGIC, Archive
    archive = Archive()
    archive.capture(cbf.encode([cbf.Frame("pc", 0x400100)]),
                    ImageMap("linux-x86_64", [Image(image_path, 0x400000, 0x500000)]),
                    thread="1", reason="SIGTRAP")
    path.write_bytes(MAGIC + archive.pending_bytes())
    return path


def frame0_rows(archive_path, program, debugger):
    """(line at frame #0's PC, line one byte before it) of the one trace
    of the archive at archive_path, read from ``program``'s file with
    ``debugger``'s choice of row (sfbt.dwarf.line_program.preferred_rows): what
    says whether a stop tests the lookup address and the rows' choice."""
    from sfbt.archive.store import read_archive
    from sfbt.symbols.symbolizer import FileSymbolizer
    archive, error = read_archive(archive_path)
    assert error is None
    (trace,) = archive.traces.values()
    pc = trace.decoded().frames[0].address
    (image,) = [i for i in archive.image_map(trace.events[0].image_map_index).images
                if i.path == str(program)]
    symbols = FileSymbolizer.open(str(program), debugger=debugger)
    try:
        return tuple(symbols.line(pc - image.base + symbols.base_address - back)
                     for back in (0, 1))
    finally:
        symbols.close()


def archive_naming_a_fifo(tmp_path):
    """(fifo, archive path): one_frame_archive whose image's file is a FIFO
    (opening it for reading would block)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo, one_frame_archive(tmp_path / "fifo.sfbt", str(fifo))


def objdump_contents(text):
    """objdump's output from the line ``Contents of the SFrame section`` on."""
    at = text.find("Contents of the SFrame section")
    return text[at:] if at >= 0 else ""


@pytest.fixture
def without_pyelftools(tmp_path):
    """An environment (PYTHONPATH) under which `import elftools` fails."""
    package = tmp_path / "hide" / "elftools"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    return {"PYTHONPATH": str(package.parent)}


@pytest.fixture(scope="session")
def cxx_big(request):
    """bench/cxx_big.py's C++ program (22 MB, -O2 -g --gsframe: about
    30,000 template instances, calls inlined 10 deep), built once and kept
    in pytest's cache directory (named by its sources' hash: a change to
    them builds it again)."""
    return bench_module("cxx_big").build(request.config.cache.mkdir("cxx_big"))


# -- the debugger matrix (tests/debuggers.py) ---------------------------------

import debuggers  # noqa: E402  (needs the environment set above)


def _slot_fixture(slots):
    @pytest.fixture(scope="session", params=slots, ids=lambda slot: slot.id)
    def fixture(request):
        slot = request.param
        require(slot.debugger is not None, slot.missing_reason)
        return slot.debugger
    return fixture


#: each of Debian's GDB and the PyPI GDB
gdb = _slot_fixture(debuggers.gdb_slots())
#: each of Debian's gdb-multiarch and the PyPI GDB, for AArch64 and s390x
cross_gdb = _slot_fixture(debuggers.cross_gdb_slots())
#: each of Debian's LLDB, LLDB 19 (unpacked beside it) and the PyPI LLDB
lldb = _slot_fixture(debuggers.lldb_slots())
#: those of them with frame providers (LLDB 22 and newer)
provider_lldb = _slot_fixture(debuggers.provider_lldb_slots())
