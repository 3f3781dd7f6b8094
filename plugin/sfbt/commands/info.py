"""info sframe (GDB) / sframe-info (LLDB): each module's SFrame data."""

from ..errors import CommandError
from ..printable import printable
from .session import Session

HELP = """\
List the loaded object files and where their SFrame data comes from.

Each line shows a module's address range, its SFrame data (the section
version and FDE count, and whether it was read from the file or from the
target's memory; "synthesized from .eh_frame" for rows made from DWARF
call-frame information; or "none") and its path."""


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
    return "\n".join(lines)
