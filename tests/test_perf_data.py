"""`sfbt fold perf.data`, `sfbt flame perf.data`: a file `perf record
--call-graph dwarf` wrote, its samples' copied registers and stacks walked
with SFrame, compared with what perf makes of the SAME file (perf script,
which unwinds with libdw; perf report).  And a perf.data that lies about
its sizes: one line naming the offset, never a traceback or a loop."""

import collections
import functools
import os
import re
import shutil
import signal
import struct
import subprocess
import sys

import pytest

from conftest import PLUGIN, require, run_sfbt
from gdb_support import compile_program
from live_harness import run_interrupted
from test_perf_record import user_self_shares
from test_stack import Running

#: the frames a whole stack ends at (outermost first in a folded line)
_OUTERMOST = ("_start", "clone3", "clone")


def _whole(stacks):
    """The Counter of ``stacks`` (a Counter, or stacks one by one) that
    reach a thread's start, but those of a program still in its dynamic
    linker's start-up (_dl_sysdep_start, or from a _start that is not the
    program's, which calls __libc_start_main): there perf's libdw
    unwinding skips frames (in munmap, perf goes on to _dl_sysdep_start,
    where sfbt, as GDB's bt at the same stop, goes through
    _dl_unload_cache and dl_main; in init_cpu_features, perf goes from it
    to _start, where sfbt goes through _dl_start and the calls inlined
    into _dl_sysdep_start)."""
    counted = stacks if isinstance(stacks, collections.Counter) else collections.Counter(stacks)
    return collections.Counter({
        stack: count for stack, count in counted.items()
        if stack[0] in _OUTERMOST and "_dl_sysdep_start" not in stack
        and (stack[0] != "_start" or stack[1:2] == ("__libc_start_main_impl",))})

_LOOP = """\
import time
def inner(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
def outer():
    end = time.monotonic() + 2
    while time.monotonic() < end:
        inner(20000)
outer()
"""


def _perf_record(output, command, seconds=None, pid=None, every_process=False, options=(),
                 environment=None):
    """Run ``perf record --call-graph dwarf`` (and ``options``, in
    ``environment`` added to ours) of ``command`` (or of the running
    process ``pid``, or with ``every_process`` of every process, while
    ``command`` runs) into ``output``; with ``seconds``, perf is
    interrupted that long after the command printed "ready" (the command
    runs on): perf starts it slowly on a loaded machine, and seconds
    counted from perf's own start once left a file without one sample
    with a stack."""
    attach = ["-p", str(pid)] if pid is not None else ["-a"] if every_process else []

    def until_interrupted(perf):
        assert perf.stdout.readline().strip() == "ready"
        try:
            perf.wait(seconds)
        except subprocess.TimeoutExpired:
            pass  # perf records on: run_interrupted stops it

    _, recorded = run_interrupted(
        ["perf", "record", "--call-graph", "dwarf", "-F", "499", "-g", *attach, *options,
         "-o", output, "--", *command], None if seconds is None else until_interrupted, 120,
        stdout=subprocess.DEVNULL if seconds is None else subprocess.PIPE,
        env=dict(os.environ, **(environment or {})))
    assert "Captured and wrote" in recorded.stderr, recorded.stderr
    return output


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """{name: perf.data}: busy.c (no frame pointers, gas --gsframe: qsort
    and snprintf recursing, two threads), started by perf and attached to
    (perf record -p: its mappings are perf's MMAP2 records made from
    /proc/PID/maps), and Debian's python3 running a pure-Python loop."""
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    directory = tmp_path_factory.mktemp("perfdata")
    probe = subprocess.run(["perf", "record", "-o", str(directory / "probe.data"), "--",
                            "true"], capture_output=True, text=True, timeout=60)
    require(probe.returncode == 0, f"perf record refused: {probe.stderr.strip()[-200:]}")
    busy = compile_program(directory, "busy", "O2", True, ["busy.c"])
    loop = directory / "loop.py"
    loop.write_text(_LOOP)
    recordings = {"busy": _perf_record(directory / "busy.data", [busy, 1], seconds=5),
                  "python": _perf_record(directory / "python.data",
                                         ["/usr/bin/python3", loop])}
    with Running(busy, 1) as running:
        recordings["attached"] = _perf_record(directory / "attached.data", ["sleep", "2"],
                                              pid=running.pid)
    return recordings


def _perf_stacks(data):
    """([frames' function names, outermost first] of each sample that has
    any, as `perf script` unwinds it (inlined frames kept, as sfbt keeps
    them; the vDSO's as _vdso_name names them), how many samples `perf
    script` prints)."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym"],
                            capture_output=True, text=True, timeout=300, check=True).stdout
    stacks, samples = [], 0
    for block in script.split("\n\n"):
        samples += bool(block.strip())
        names = []
        for line in block.splitlines()[1:]:
            match = re.match(r"\s*([0-9a-f]+) (.*)", line)
            if match:
                names.append(_vdso_name(re.sub(r" \(inlined\)$", "", match[2])))
        if names:
            stacks.append(tuple(reversed(names)))
    return stacks, samples


#: how perf names what sfbt names otherwise: the signal trampoline
#: (libc's __restore_rt, in no symbol table perf reads) is GDB's
#: "<signal handler called>" to sfbt; a PLT slot of an IRELATIVE
#: relocation, GDB's "*ABS*+0xADDR@plt", is perf's "@plt"
_PERF_NAMES = {"<signal handler called>": "[unknown]"}


def _sfbt_stacks(data):
    """Counter of sfbt fold's stacks (names, outermost first; an unnamed
    frame's address as perf's "[unknown]", see _PERF_NAMES)."""
    folded = run_sfbt("fold", data)
    assert folded.returncode == 0, folded.stderr
    assert "Traceback" not in folded.stderr
    stacks = collections.Counter()
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        stacks[tuple("[unknown]" if re.fullmatch(r"0x[0-9a-f]+", name)
                      else "@plt" if re.fullmatch(r"\*ABS\*\+0x[0-9a-f]+@plt", name)
                      else _PERF_NAMES.get(name, name)
                      for name in stack.split(";"))] += int(count)
    return stacks


def _matched(perf, sfbt):
    """(perf's stacks that sfbt has not, sfbt's that perf has not), each a
    Counter of stacks.  Kernel frames atop user frames match as they are:
    sfbt names the user PC below them at itself (an interrupted
    instruction, or where a system call returns to), as perf does.  A
    sample in a stub of .plt.got (libc's free@plt) is "[unknown]" to perf,
    which names only .plt's stubs, and free@plt to sfbt, as GDB names it."""
    missing, extra = perf - sfbt, sfbt - perf
    for stack in list(missing):
        if stack[-1] != "[unknown]":
            continue
        for other in list(extra):
            if other[:-1] == stack[:-1] and other[-1].endswith("@plt"):
                taken = min(missing[stack], extra[other])
                missing[stack] -= taken
                extra[other] -= taken
    return +missing, +extra


def _vdso_name(name):
    """A name of perf's as sfbt names it: the vDSO's as GDB names it
    (clock_gettime, perf's __vdso_clock_gettime); others as they are
    (the kernel's too: perf's alias of an address is sfbt's)."""
    return name.removeprefix("__vdso_")


def _report_self_shares(data):
    """({function: self share} of `perf report --stdio --no-children`,
    the share of its samples taken in the kernel)."""
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                             "--sort", "sym", "-q", "-g", "none"], capture_output=True,
                            text=True, timeout=300, check=True).stdout
    kernel = sum(float(share) for share in re.findall(r"^\s*([\d.]+)%\s+\[k\]", report, re.M))
    return user_self_shares(report), kernel / 100


@pytest.mark.parametrize("name", ["busy", "attached", "python"])
def test_fold_of_a_perf_data_is_perf_scripts_stacks(recordings, name):
    data = recordings[name]
    perf, samples = _perf_stacks(data)
    sfbt = _sfbt_stacks(data)
    # every sample of the file, each walked once (a loaded machine gives
    # the program little time: perf starts slowly, and it shares the CPUs);
    # perf shows no user frame where its own unwinding of a sample fails
    assert sum(sfbt.values()) == samples >= 20
    assert len(perf) >= 0.99 * samples
    # the hottest functions (the innermost frame) and their shares
    perf_leaves = collections.Counter(stack[-1] for stack in perf)
    sfbt_leaves = collections.Counter()
    for stack, count in sfbt.items():
        sfbt_leaves[stack[-1]] += count
    for function, count in perf_leaves.most_common(5):
        assert abs(sfbt_leaves[function] - count) / len(perf) <= 0.03, \
            (function, sfbt_leaves.most_common(8), perf_leaves.most_common(8))
    hottest, count = sfbt_leaves.most_common(1)[0]
    report, kernel = _report_self_shares(data)
    assert hottest == max(report, key=report.get)
    # perf report counts a sample taken in the kernel for the kernel's
    # function, sfbt (and perf script's user frames) for the user function
    # below it: a loaded machine has more of those
    share = count / len(perf)
    assert report[hottest] - 0.03 <= share <= report[hottest] + kernel + 0.03, \
        (count, kernel, report)
    # each sample perf unwinds to the stack's start (main and on), sfbt
    # unwinds to the same functions; where perf's own unwinding stops
    # short (a few samples of a loaded machine), sfbt may go on to the start
    whole = _whole(perf)
    assert sum(whole.values()) >= 0.2 * len(perf)
    missing, extra = _matched(whole, _whole(sfbt))
    assert not missing, (list(missing)[:2], list(extra)[:2])
    assert sum(extra.values()) <= 0.02 * samples, list(extra)[:2]
    if name != "python":
        assert any("main" in stack for stack in whole)
        assert any("start_thread" in stack for stack in whole)
        assert any("msort_with_tmp" in stack for stack in whole)
    else:
        assert any("Py_BytesMain" in stack for stack in whole)


def test_flame_and_the_other_outputs_of_a_perf_data(recordings, tmp_path):
    data = recordings["busy"]
    for output_format in ("svg", "speedscope", "pprof"):
        output = tmp_path / f"busy.{output_format}"
        drawn = run_sfbt("flame", data, "-o", output, "--format", output_format)
        assert drawn.returncode == 0, drawn.stderr
        assert re.search(rf"{output_format} of \d+ stacks", drawn.stdout), drawn.stdout
        assert output.stat().st_size > 100
    assert b"descend" in (tmp_path / "busy.svg").read_bytes()
    per_thread = run_sfbt("fold", "--per-thread", data)
    assert per_thread.returncode == 0, per_thread.stderr
    roots = {line.split(";", 1)[0] for line in per_thread.stdout.splitlines()}
    assert any(root.startswith("busy-0 (") for root in roots), roots


def test_a_file_of_another_build_or_one_its_owner_cannot_read_is_not_read(recordings,
                                                                          tmp_path):
    """The modules a perf.data names are read only where they are the
    recorded build, and as the perf.data's owner could read them."""
    busy = compile_program(tmp_path, "busy", "O2", True, ["busy.c"])
    data = _perf_record(tmp_path / "busy.data", [busy, 1], seconds=2)
    assert "descend" in run_sfbt("fold", data).stdout
    # the recording's owner (nobody) may not read the program
    copy = tmp_path / "other.data"
    shutil.copyfile(data, copy)
    if os.geteuid() == 0:
        os.chown(copy, 65534, 65534)
        busy.chmod(0o700)
        refused = run_sfbt("fold", copy)
        assert refused.returncode == 0, refused.stderr
        assert "descend" not in refused.stdout
        assert "may not read it" in refused.stderr
        trusted = run_sfbt("fold", "--trust-files", copy)
        assert trusted.returncode == 0 and "descend" in trusted.stdout, trusted.stderr
        busy.chmod(0o755)
    # another build of the program where it was
    subprocess.run(["gcc", "-O1", "-o", str(busy), "-xc", "-"],
                   input="int main(void) { return 0; }\n", text=True, check=True,
                   capture_output=True)
    rebuilt = run_sfbt("fold", data)
    assert rebuilt.returncode == 0, rebuilt.stderr
    names = set(re.split(r"[;\s]", rebuilt.stdout))  # (kernel frames hold *spin* names)
    assert "descend" not in names and "spin" not in names
    assert re.search(rf"sfbt: warning: {re.escape(str(busy))}: build id [0-9a-f]+ on disk, "
                     r"not the recording's [0-9a-f]+; its frames are unknown", rebuilt.stderr)


def _header(data):
    """(attr size, data section offset, data section size) of a perf.data."""
    attr_size, = struct.unpack_from("<Q", data, 16)
    data_at, data_size = struct.unpack_from("<QQ", data, 40)
    return attr_size, data_at, data_size


def _one_line_error(path, *expected):
    failed = run_sfbt("fold", path)
    assert failed.returncode == 1
    assert failed.stdout == ""
    lines = failed.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sfbt: {path}: "), failed.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def test_a_corrupt_perf_data_is_one_line_naming_the_offset(recordings, tmp_path):
    original = recordings["busy"].read_bytes()
    attr_size, data_at, data_size = _header(original)
    truncated = tmp_path / "truncated.data"
    truncated.write_bytes(original[:data_at + data_size // 2])
    _one_line_error(truncated, "offset 40", "truncated")
    # the header's attr size
    bad_attr = tmp_path / "attr-size.data"
    bad_attr.write_bytes(original[:16] + struct.pack("<Q", 3) + original[24:])
    _one_line_error(bad_attr, "offset 16", "attr size of 3")
    # an attr's own size, larger than its entry
    attrs_at, = struct.unpack_from("<Q", original, 24)
    own = bytearray(original)
    struct.pack_into("<I", own, attrs_at + 4, 60000)
    bad_own = tmp_path / "attr-own.data"
    bad_own.write_bytes(bytes(own))
    _one_line_error(bad_own, f"offset {attrs_at + 4}", "attr of size 60000")
    # a record of size 0 (a reader that adds it would loop for ever)
    zero = bytearray(original)
    struct.pack_into("<H", zero, data_at + 6, 0)
    zero_size = tmp_path / "zero.data"
    zero_size.write_bytes(bytes(zero))
    _one_line_error(zero_size, f"offset {data_at}", "record of size 0")
    # a sample whose stack size runs past its record
    sample_at = _first_sample(original, data_at, data_size)
    lying = bytearray(original)
    size, = struct.unpack_from("<H", lying, sample_at + 6)
    # the stack copy's size, before the 8192 bytes copied, their dynamic
    # size and the sample's last few fields (DATA_SRC)
    stack_size_at = next(at for at in range(sample_at + size - 8192 - 16, sample_at, -8)
                         if struct.unpack_from("<Q", lying, at)[0] == 8192)
    struct.pack_into("<Q", lying, stack_size_at, 1 << 40)
    long_stack = tmp_path / "stack.data"
    long_stack.write_bytes(bytes(lying))
    _one_line_error(long_stack, f"offset {sample_at}", "runs past")
    # a big-endian machine's perf.data
    big = tmp_path / "big.data"
    big.write_bytes(b"2ELIFREP" + original[8:])
    _one_line_error(big, "big-endian")
    # not a perf.data nor an archive: read as before (a bare CBF trace)
    assert run_sfbt("fold", tmp_path / "truncated.data").returncode == 1


def _first_sample(data, at, size):
    """The offset of the first SAMPLE record with a full stack copy."""
    end = at + size
    while at < end:
        kind, _, record_size = struct.unpack_from("<IHH", data, at)
        if kind == 9 and record_size > 8192 + 200:
            return at
        at += record_size
    raise AssertionError("no sample")


def test_the_outputs_still_read_archives(tmp_path):
    """A perf.data is told by its magic: an archive is read as before."""
    from conftest import one_frame_archive
    archive = one_frame_archive(tmp_path / "one.sfbt", sys.executable)
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    assert folded.stdout.strip().endswith(" 1")


def test_a_perf_data_damaged_anywhere_fails_in_one_line_or_reads(recordings, tmp_path):
    """Bytes of the header, the attrs, the features and the data changed
    (and the file cut) at random, with a fixed seed: each file reads, or
    fails with one SfbtError line, within seconds; never another error."""
    import random
    from sfbt.errors import SfbtError
    from sfbt.live.perf_data import open_saved
    original = recordings["python"].read_bytes()
    _, data_at, data_size = _header(original)
    regions = [(0, 104), (104, data_at), (data_at, data_at + 4096),
               (data_at, data_at + data_size), (data_at + data_size, len(original))]
    rng = random.Random(32)
    damaged = tmp_path / "damaged.data"
    failed = 0
    for _ in range(60):
        changed = bytearray(original)
        if rng.random() < 0.2:
            changed = changed[:rng.randrange(len(changed))]
        else:
            start, end = rng.choice(regions)
            for _ in range(rng.randrange(1, 6)):
                at = rng.randrange(start, end - 8)
                value = rng.choice([0, 1, 7, 8, 0xffff, 1 << 40, (1 << 64) - 1,
                                    rng.randrange(1 << 64)])
                struct.pack_into("<Q", changed, at, value)
        damaged.write_bytes(bytes(changed))
        signal.alarm(30)  # a loop ends the test (SIGALRM), not the suite
        try:
            with open_saved(str(damaged)):
                pass
        except SfbtError as error:
            assert "\n" not in str(error)
            failed += 1
        finally:
            signal.alarm(0)
    assert 5 <= failed < 60


@functools.lru_cache(maxsize=None)
def _kernel_functions():
    """The running kernel's function names, from /proc/kallsyms."""
    with open("/proc/kallsyms") as kallsyms:
        return frozenset(fields[2] for fields in map(str.split, kallsyms)
                         if fields[1] in "tTwW")


def _per_thread_stacks(data, comms, alias, environment=None):
    """{comm: Counter of stacks} of perf script's (all its samples counted
    too) and sfbt fold --per-thread's (those it cut left out, but in the
    dynamic linker's start, under [cut]), each name through ``alias``;
    both run in ``environment`` added to ours."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym"],
                            capture_output=True, text=True, timeout=300, check=True,
                            env=dict(os.environ, **(environment or {}))).stdout
    perf = {comm: collections.Counter() for comm in comms}
    samples = 0
    for block in filter(str.strip, script.split("\n\n")):
        samples += 1
        lines = block.splitlines()
        comm = lines[0].split()[0]
        if comm in perf:
            names = [re.sub(r" \(inlined\)$", "", match[1]) for match in
                     (re.match(r"\s*[0-9a-f]+ (.*)", line) for line in lines[1:]) if match]
            perf[comm][tuple(alias(name) for name in reversed(names))] += 1
    env = dict(os.environ, PYTHONPATH=str(PLUGIN), **(environment or {}))
    folded = subprocess.run([sys.executable, "-m", "sfbt", "fold", "--per-thread", str(data)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert folded.returncode == 0 and "Traceback" not in folded.stderr, folded.stderr
    sfbt = {comm: collections.Counter() for comm in comms}
    total = 0
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        total += int(count)
        thread, *names = stack.split(";")
        comm = thread.split(" (", 1)[0]
        # a stack sfbt says is cut is no stack (the counts then differ from
        # perf's), but in the dynamic linker's first function: its _start
        # has no CFI, the walk reads on past the stack's copy there (a new
        # process's environment above it), and perf too ends at _start
        if comm in sfbt and (names[0] != "[cut]" or names[1:3] == ["_start", "_dl_start"]):
            sfbt[comm][tuple(alias(name) for name in names)] += int(count)
    return perf, samples, sfbt, total


def test_kernel_and_vdso_frames_of_a_perf_data_are_perf_scripts(tmp_path):
    """perf record -a of a loop of system calls and of a loop reading the
    clock in the vDSO: every sample of the file (kernel threads' and the
    idle task's with their kernel frames alone), the kernel's frames named
    from /proc/kallsyms (the file's kernel is the running one) and the
    vDSO's from perf's build-id cache, as perf script names them; where
    the build ids are not those of this machine's kernel and vDSO, their
    frames are left unnamed, as perf leaves them."""
    from sfbt.symbols.kallsyms import kernel_text_start, running_kernel_build_id
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    require(kernel_text_start() is not None, "the kernel hides its addresses (kptr_restrict)")
    syscalls = compile_program(tmp_path, "syscalls", "O2", True, ["syscalls.c"])
    clock = compile_program(tmp_path, "clock_loop", "O2", True, ["clock_loop.c"])
    with Running(syscalls):
        data = _perf_record(tmp_path / "all.data", [clock, 1], every_process=True)
    def alias(name):
        """The vDSO's names as GDB names them; a PLT
        slot sfbt names as GDB does (syscall@plt), perf after the symbol
        before the PLT (_init)."""
        if name == "_init" or name.endswith("@plt"):
            return "[plt]"
        return _vdso_name(name)
    comms = ("syscalls", "clock_loop")
    perf, samples, sfbt, total = _per_thread_stacks(data, comms, alias)
    assert total == samples
    entry = "entry_SYSCALL_64_after_hwframe"
    for comm in comms:
        # the same innermost functions (kernel ones included), and every
        # stack perf unwinds whole is sfbt's (perf's libdw cannot unwind
        # the programs' own frames: they have .sframe, no .eh_frame)
        count = sum(perf[comm].values())
        assert sum(sfbt[comm].values()) == count >= 20, comm
        perf_leaves = collections.Counter()
        sfbt_leaves = collections.Counter()
        for stacks, leaves in ((perf[comm], perf_leaves), (sfbt[comm], sfbt_leaves)):
            for stack, times in stacks.items():
                leaves[stack[-1]] += times
        for leaf, times in perf_leaves.most_common(3):
            assert abs(sfbt_leaves[leaf] - times) <= 0.03 * count, (leaf, perf_leaves,
                                                                     sfbt_leaves)
        whole = _whole(perf[comm])
        missing, extra = _matched(whole, sfbt[comm])
        assert not missing, (list(missing)[:2], list(extra)[:2])
        assert sum(times for stack, times in sfbt[comm].items()
                   if stack[0] in _OUTERMOST) >= 0.8 * count
    in_kernel = sum(count for stack, count in sfbt["syscalls"].items() if entry in stack)
    assert in_kernel >= 0.3 * sum(sfbt["syscalls"].values())
    in_vdso = sum(count for stack, count in sfbt["clock_loop"].items()
                  if stack[-1] == "clock_gettime")
    assert in_vdso >= 0.5 * sum(sfbt["clock_loop"].values())

    # the same file of another kernel and vDSO: their frames unnamed
    recorded = data.read_bytes()
    kernel_id = bytes.fromhex(running_kernel_build_id())
    vdso_id = bytes.fromhex(next(line.split()[0] for line in subprocess.run(
        ["perf", "buildid-list", "-i", str(data)], capture_output=True, text=True,
        check=True).stdout.splitlines() if line.endswith(" [vdso]")))
    other = tmp_path / "other.data"
    other.write_bytes(recorded.replace(kernel_id, bytes(20)).replace(vdso_id, bytes(19) + b"\1"))
    unnamed = re.compile(r"0x[0-9a-f]+")
    perf, samples, sfbt, total = _per_thread_stacks(
        other, comms, lambda name: "[unknown]" if unnamed.fullmatch(name) else name)
    assert total == samples
    kernel_names = _kernel_functions() - {name for stack in perf["syscalls"] for name in stack}
    for comm in comms:
        assert not kernel_names & {name for stack in sfbt[comm] for name in stack}, comm
    assert not any(stack[-1] == "clock_gettime" for stack in sfbt["clock_loop"])
    assert sum(count for stack, count in sfbt["clock_loop"].items()
               if stack[-2:] == ("__GI___clock_gettime", "[unknown]")) >= \
        0.5 * sum(sfbt["clock_loop"].values())


def test_vdso_frames_of_a_perf_data_named_from_this_machines_vdso(tmp_path):
    """perf record --no-buildid-cache (and an empty build-id cache): the
    recording's vDSO is in no cache, so perf script names its frames from
    this machine's vDSO (the recorded build), and so does sfbt (which left
    them unnamed), as many as perf names."""
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    clock = compile_program(tmp_path, "clock_loop", "O2", True, ["clock_loop.c"])
    cache = tmp_path / "build-id-cache"
    cache.mkdir()
    environment = {"PERF_BUILDID_DIR": str(cache)}
    data = _perf_record(tmp_path / "vdso.data", [clock, 1], options=["--no-buildid-cache"],
                        environment=environment)
    assert not any(cache.iterdir())
    perf, samples, sfbt, total = _per_thread_stacks(data, ("clock_loop",), _vdso_name,
                                                    environment)
    assert total == samples
    perf, sfbt = perf["clock_loop"], sfbt["clock_loop"]
    count = sum(perf.values())
    assert sum(sfbt.values()) == count >= 20
    in_perf = sum(times for stack, times in perf.items() if stack[-1] == "clock_gettime")
    in_sfbt = sum(times for stack, times in sfbt.items() if stack[-1] == "clock_gettime")
    assert in_perf >= 0.5 * count
    assert abs(in_sfbt - in_perf) <= 0.03 * count, (in_sfbt, in_perf, sfbt.most_common(3))
    # the whole stacks into the vDSO: perf's are sfbt's
    whole = collections.Counter({stack: times for stack, times in perf.items()
                                 if stack[0] in _OUTERMOST and stack[-1] == "clock_gettime"})
    missing, _ = _matched(whole, sfbt)
    assert not missing, list(missing)[:2]


_MOVED = """\
import os, time
os.sched_setaffinity(0, {0})
end = time.monotonic() + 1.0
while time.monotonic() < end:
    pass
"""


def test_samples_are_named_as_their_thread_was_called_at_their_time(tmp_path):
    """A program exec'd on one CPU (taskset -c 1) that moves itself to the
    other: its exec's COMM record is in CPU 1's ring, its samples in CPU
    0's, which perf writes first; each thread name of sfbt fold
    --per-thread counts the samples perf script gives that name (the old
    code named the samples before the COMM in the file as taskset)."""
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    require(len(os.sched_getaffinity(0)) >= 2 and {0, 1} <= os.sched_getaffinity(0),
            "CPUs 0 and 1 are not both usable")
    program = tmp_path / "moved.py"
    program.write_text(_MOVED)
    data = _perf_record(tmp_path / "moved.data",
                        ["taskset", "-c", "1", "/usr/bin/python3", program])
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm"],
                            capture_output=True, text=True, timeout=300, check=True).stdout
    perf = collections.Counter(line.strip() for line in script.splitlines() if line.strip())
    folded = run_sfbt("fold", "--per-thread", str(data))
    assert folded.returncode == 0, folded.stderr
    ours = collections.Counter()
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        ours[stack.split(";", 1)[0].split(" (", 1)[0]] += int(count)
    assert perf["python3"] >= 100 and ours == perf, (ours, perf)


def test_a_process_that_execs_while_recorded_has_only_its_new_programs_modules(tmp_path):
    """perf record -a while a shell that ran before the recording (its
    mappings are perf's records made from /proc) loops, then execs
    clock_loop: the samples of the shell's loop are walked in the shell's
    modules, those of clock_loop in clock_loop's alone (the exec's COMM
    record drops the shell's, which a walk could otherwise be given where
    no mapping of the new program replaced them), and clock_loop's stacks
    are perf script's."""
    from sfbt.live.perf_data import open_saved
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    clock = compile_program(tmp_path, "clock_loop", "O2", True, ["clock_loop.c"])
    go, done = tmp_path / "go", tmp_path / "done"
    os.mkfifo(go)
    os.mkfifo(done)
    shell = os.path.realpath("/bin/sh")
    # the shell waits for perf's command to say go, loops, then runs
    # clock_loop with its output to the pipe that command reads to its end
    script = (f'read line < "{go}"; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; '
              f'exec "{clock}" 1 > "{done}"')
    looping = subprocess.Popen([shell, "-c", script], stdin=subprocess.DEVNULL)
    try:
        data = _perf_record(tmp_path / "exec.data",
                            [shell, "-c", f'echo go > "{go}"; cat "{done}"'],
                            every_process=True)
        assert looping.wait(timeout=60) == 0
    finally:
        if looping.poll() is None:
            looping.kill()
            looping.wait()
    in_shell = in_program = 0
    with open_saved(str(data)) as saved:
        for trace in saved.traces():
            if not any(group.thread.pid == looping.pid for group in trace.groups):
                continue
            paths = {image.path for image in trace.images}
            if str(clock) in paths:
                assert shell not in paths, sorted(paths)
                in_program += trace.weight
            elif shell in paths:
                in_shell += trace.weight
    assert in_program >= 20 and in_shell >= 5, (in_program, in_shell)

    def alias(name):
        return "[plt]" if name == "_init" or name.endswith("@plt") else _vdso_name(name)
    perf, samples, sfbt, total = _per_thread_stacks(data, ("clock_loop",), alias)
    assert total == samples
    perf, sfbt = perf["clock_loop"], sfbt["clock_loop"]
    count = sum(perf.values())
    assert sum(sfbt.values()) == count >= 20
    perf_leaves, sfbt_leaves = collections.Counter(), collections.Counter()
    for stacks, leaves in ((perf, perf_leaves), (sfbt, sfbt_leaves)):
        for stack, times in stacks.items():
            leaves[stack[-1]] += times
    for leaf, times in perf_leaves.most_common(3):
        assert abs(sfbt_leaves[leaf] - times) <= 0.03 * count, (leaf, perf_leaves, sfbt_leaves)
    whole = _whole(perf)
    missing, extra = _matched(whole, sfbt)
    assert not missing, (list(missing)[:2], list(extra)[:2])
