"""info sframe (GDB) / sframe-info (LLDB): each module's SFrame data."""

from ..errors import CommandError
from ..printable import printable
from .session import Session

HELP = """\
List the loaded object files and where their SFrame data comes from.

Each line shows a module's address range, its SFrame data (the section
version and FDE count, and whether it was read from the file or from the
target's memory; "synthesized from .eh_frame" for rows made from DWARF
call-frame information; or "none") and its path.  A module with SFrame
data whose gaps a backtrace filled with rows from its DWARF call-frame
information (functions its .sframe has no entry for) gets a second
line: "+ where it has no row: synthesized from .eh_frame, N FDEs"."""


def info_sframe(session: Session, words, name: str = "info sframe") -> str:
    if words:
        raise CommandError(f"{name} takes no arguments")
    module_map = session.module_map()
    if not module_map.modules:
        return "No object files loaded."
    lines = [f"{'From':<18}  {'To':<18}  {'SFrame':<40}  Object file"]
    for module in module_map.modules:
        source = module_map.source_for(module)
        lines.append(f"{module.start:#018x}  {module.end:#018x}  "
                     f"{printable(source.describe()):<40}  {printable(module.path)}")
        gaps_filled = getattr(module_map.sources, "gaps_filled", None)
        filled = gaps_filled(module) if gaps_filled is not None and \
            source.section is not None and source.origin != "synth" else None
        if filled is not None:
            lines.append(f"{'':<38}  + where it has no row: {printable(filled.describe())}")
    return "\n".join(lines)
