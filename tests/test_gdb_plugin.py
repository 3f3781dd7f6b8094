"""The plugin as a user meets it: loaded by ~/.gdbinit, surviving bad SFrame
data, settings and help."""

import os
import subprocess

from elftools.elf.elffile import ELFFile

from conftest import ROOT
from gdb_support import build_recurse, compile_program, gdb_pcs, run_gdb, sframe_frames
from sfbt.sframe import read_section
from sfbt.sframe import constants as C


def test_plain_gdb_loads_the_plugin_after_install(gdb):
    # ./install.sh (run before the suite) added the line to ~/.gdbinit.
    gdbinit = os.path.expanduser("~/.gdbinit")
    assert f"source {ROOT}/gdb/sfbt_gdb.py" in open(gdbinit).read().splitlines()
    result = subprocess.run([gdb.command, "-batch", "-ex", "help sframe-bt",
                             "-ex", "show sframe unwinder"],
                            capture_output=True, text=True, timeout=60)
    assert "Usage: sframe-bt [N | -N] [-v] [-full]" in result.stdout
    assert 'The SFrame frame unwinder is "auto".' in result.stdout


def test_without_pyelftools_sframe_bt_walks_to_main(gdb, without_pyelftools, tmp_path):
    # The plugin reads symbols, line programs, inline entries and CFI
    # itself: pyelftools is a test dependency only.
    program = build_recurse(tmp_path, "O2", True)
    out = run_gdb(gdb, [str(program)], [
        "python import importlib.util as u; print('ELFTOOLS-AT', u.find_spec('elftools').origin)",
        "break stop_here", "run 3", "echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt"],
        environment=without_pyelftools)
    hidden = os.path.join(without_pyelftools["PYTHONPATH"], "elftools", "__init__.py")
    assert f"ELFTOOLS-AT {hidden}" in out, out
    assert "Traceback" not in out and "Python Exception" not in out, out
    section = out.split("==STOP==")[1]
    (expected,) = gdb_pcs(section)
    frames = sframe_frames(section)
    assert [pc for _, pc, _ in frames] == expected, section
    names = [name for _, _, name in frames]
    assert names[0] == "stop_here" and names[-1] == "main", section
    assert names.count("recurse") == 4, section


def corrupt_first_row(program, function_name):
    """Give the first row of a function an invalid data word size."""
    with open(program, "rb") as stream:
        elf = ELFFile(stream)
        symbol = elf.get_section_by_name(".symtab").get_symbol_by_name(function_name)[0]
        section = elf.get_section_by_name(".sframe")
        data, file_offset, address = section.data(), section["sh_offset"], section["sh_addr"]
    sframe = read_section(data, address)
    index = next(i for i, f in enumerate(sframe.functions)
                 if f.start == symbol["st_value"])
    body = C.HEADER_SIZE + len(sframe.aux_header)
    fde = body + index * 17  # system gas: SFrame v1, 17-byte FDEs
    fre_off = int.from_bytes(data[fde + 8:fde + 12], "little")
    freoff = int.from_bytes(data[24:28], "little")
    address_size = C.FRE_ADDRESS_SIZES[sframe.functions[index].fre_type]
    info_at = file_offset + body + freoff + fre_off + address_size
    raw = bytearray(program.read_bytes())
    raw[info_at] |= 0x60
    program.write_bytes(bytes(raw))


def test_bad_sframe_data_never_reaches_the_user(gdb, tmp_path):
    program = compile_program(tmp_path, "steps", "O2", True, ["steps.c"])
    corrupt_first_row(program, "middle")
    out = run_gdb(gdb, [str(program)], [
        # on: the unwinder reads every frame's rows (auto leaves this
        # program, which has CFI everywhere, to GDB)
        "set sframe unwinder on",
        "break leaf", "run", "echo ==BT==\\n", "bt", "echo ==SFRAME==\\n",
        "sframe-bt", "echo ==DEBUG==\\n", "set sframe debug on"])
    assert "Traceback" not in out and "Python Exception" not in out, out
    bt = out.split("==BT==")[1].split("==SFRAME==")[0]
    assert " in middle " in bt and " in main " in bt  # GDB's own unwinders took over
    ours = out.split("==SFRAME==")[1].split("==DEBUG==")[0]
    # leaf unwinds; middle, whose rows are corrupt, ends the walk
    assert [name for _, _, name in sframe_frames(ours)] == ["leaf", "middle"]
    assert "Backtrace stopped: bad SFrame data in" in ours
    assert "has invalid data word size code 3" in ours
    debug = out.split("==DEBUG==")[1]
    assert "Recent SFrame unwinder errors:" in debug
    assert "SFrameError" in debug


def test_settings_and_errors(gdb, tmp_path):
    out = run_gdb(gdb, [], [
        "show sframe unwinder", "set sframe unwinder off", "show sframe unwinder",
        "show sframe fallback", "set sframe fallback none", "show sframe fallback",
        "show sframe backtrace-limit", "set sframe backtrace-limit 5",
        "show sframe backtrace-limit", "sframe-bt", "sframe-bt bogus",
        "complete sframe-bt -f"])
    assert 'The SFrame frame unwinder is "off".' in out
    assert "falls back to: none." in out
    assert "The upper bound on sframe-bt frames is unlimited." in out
    assert "The upper bound on sframe-bt frames is 5." in out
    assert "No stack." in out
    assert "sframe-bt: unknown argument 'bogus'" in out
    assert "sframe-bt -full" in out
    assert "Traceback" not in out


def test_show_sframe_lists_every_setting(gdb):
    """`show sframe` lists the settings as GDB's `show history` lists its own."""
    out = gdb.run([], ["set sframe fallback none", "show sframe"])
    lines = [line for line in out.splitlines() if line.startswith("sframe ")]
    assert lines == [
        "sframe backtrace-limit:  The upper bound on sframe-bt frames is unlimited.",
        "sframe debug:  SFrame unwinder debugging output is off.",
        "sframe fallback:  Where SFrame has no data, sframe-bt falls back to: none.",
        "sframe synthesize:  Synthesizing SFrame rows from .eh_frame/.debug_frame "
        "for objects without .sframe is on.",
        'sframe unwinder:  The SFrame frame unwinder is "auto".'], out


def test_info_sframe_without_a_program_says_so(gdb):
    out = gdb.run([], ["info sframe"])
    assert out.strip() == ('No program loaded: use the "file" command, '
                           'attach to a process or open a core file.'), out


def test_cbf_save_completes_options_formats_and_files(gdb, tmp_path):
    (tmp_path / "saved.sfbt").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    out = gdb.run([], ["complete cbf-save --", "echo ==\\n",
                       "complete cbf-save --format ", "echo ==\\n",
                       "complete cbf-save --append --format j", "echo ==\\n",
                       "complete cbf-save --all-threads --a", "echo ==\\n",
                       f"complete cbf-save --append {tmp_path}/s", "echo ==\\n",
                       f"complete cbf-save {tmp_path}/f"])
    options, formats, json, append, file_name, folder = out.split("==\n")
    assert options.split("\n")[:-1] == [
        "cbf-save --all-threads", "cbf-save --append", "cbf-save --format",
        "cbf-save --label"], out
    assert formats.split("\n")[:-1] == [
        f"cbf-save --format {fmt}" for fmt in ("archive", "cbf", "json", "lws")], out
    assert json == "cbf-save --append --format json\n"
    assert append == "cbf-save --all-threads --append\n"
    assert file_name == f"cbf-save --append {tmp_path}/saved.sfbt\n"
    assert folder.strip() == f"cbf-save {tmp_path}/folder/"
