import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugin"
FIXTURES = ROOT / "tests" / "fixtures"
# Third-party conformance data, carried with its license (see its README).
CONFORMANCE = ROOT / "tests" / "conformance"

# Synthesized SFrame sections go to a cache of the test run's own, never the
# user's (the debuggers the tests start inherit this).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="sfbt-tests-cache-")

if str(PLUGIN) not in sys.path:
    sys.path.insert(0, str(PLUGIN))


def run_sfbt(*args, input=None):
    """Run the command line as a user would: python3 -m sfbt from a checkout."""
    env = dict(os.environ, PYTHONPATH=str(PLUGIN))
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, args)],
                          capture_output=True, text=True, env=env, input=input,
                          timeout=120)


def objdump_contents(text):
    """objdump's output from the line ``Contents of the SFrame section`` on."""
    at = text.find("Contents of the SFrame section")
    return text[at:] if at >= 0 else ""
