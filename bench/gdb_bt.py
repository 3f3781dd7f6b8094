"""sframe-bt against GDB's own bt, in the real gdb, at a 1,000-frame -O2
recursion (`set print frame-arguments none`, the layout sframe-bt uses).

Prints each command's time (best of 5) and the ratio sframe-bt / bt.
Run: python3 bench/gdb_bt.py
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "plugin"))

from gdb_support import compile_library, compile_program, run_gdb  # noqa: E402

TIMER = """
python
import time
def _sfbt_best(command, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        gdb.invalidate_cached_frames()
        began = time.perf_counter()
        gdb.execute(command, to_string=True)
        best = min(best, time.perf_counter() - began)
    return best
bt = _sfbt_best("bt")
ours = _sfbt_best("sframe-bt")
print(f"RESULT bt {bt * 1e3:.1f} ms, sframe-bt {ours * 1e3:.1f} ms, ratio {ours / bt:.2f}")
end
"""


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        library = compile_library(out, "libapply.so", "O2", ["libapply.c"])
        program = compile_program(out, "recurse", "O2", True, ["recurse.c"], [library])
        script = out / "timer.gdb"
        script.write_text(TIMER)
        text = run_gdb([str(program)], [
            "set print frame-arguments none", "set sframe unwinder off",
            "break stop_here", "run 1000", f"source {script}"])
    results = [line for line in text.splitlines() if line.startswith("RESULT")]
    if not results:
        print(text[-2000:])
        return 1
    print("1,008 frames (-O2, PIE):", results[0].removeprefix("RESULT "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
