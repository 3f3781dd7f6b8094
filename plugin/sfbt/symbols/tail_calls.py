"""The frames a tail call left off the stack, rebuilt as GDB rebuilds them
(its dwarf2/frame-tailcall.c and the call-site chains of dwarf2/loc.c).

A function that ends with a jump to another (a tail call) leaves no frame:
its caller's return address is on the stack, the function jumped to runs.
GDB looks up the call site its caller's return address belongs to
(sfbt.dwarf.call_sites) and searches, depth first, every path of tail
calls from what that site calls to the function the callee frame is in,
through functions that list all their tail calls only.  Of all the paths
it keeps the calls they share from the caller's side and from the
callee's; a frame is shown for each of those (with the address the tail
call would have returned to, after the jump): all of the path's calls
when there is one path, none when the paths share nothing or anything is
unknown on the way (an indirect call, a function without DWARF, a
callee's name no module defines).

LLDB (its StackFrameList's FindInterveningFrames) shows the frames of a
path only where it is the one path (``unique``): a second path, or a
function reached twice on the way, and it shows none; a call it cannot
resolve (indirect) or a function without call sites is a path that leads
nowhere rather than the end of the search; and it knows only the call
sites that are children of their function's own entry (none nested in a
block or an inlined call: a C library's call from inlined code, as
__pthread_clockjoin_ex's to its futex wait, gives no frame).

The search is bounded: MAX_VISITS call sites entered, MAX_DEPTH calls on a
path; past either there is no chain (as for an ambiguous one)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Protocol, Set, Tuple

    from ..dwarf.call_sites import CallSite, Target
    from .symbolizer import FileSymbolizer

    #: a loaded module (sfbt.unwind.target.Module, a layer beside this one)
    Module = Any
    #: the loaded modules (sfbt.unwind.modules.ModuleMap): ``modules``, in
    #: GDB's order, and ``module_for(pc)``
    ModuleMap = Any

    class Symbolizers(Protocol):
        """Each module's FileSymbolizer (or None), made once: the
        symbolizers of a session's module files (commands.session's
        FileSymbolizers, the debugger-free Describer)."""

        def symbols(self, module: Module) -> Optional[FileSymbolizer]: ...
    #: a call site where it runs: (load bias of its module, its site)
    Placed = Tuple[int, CallSite]

#: call sites a search may enter (each call site's tail calls are tried
#: from each path reaching it)
MAX_VISITS = 10_000
#: tail calls one path may hold
MAX_DEPTH = 256


class _NoChain(Exception):
    """What GDB's NO_ENTRY_VALUE_ERROR says: no chain can be made."""


class TailCalls:
    """The tail-call frames between two frames of a walk, over the
    modules of ``module_map`` and their symbols (``symbolizers``'
    ``symbols(module)``, a FileSymbolizer or None); no session held, so
    it is kept while the modules stay the same."""

    def __init__(self, module_map: ModuleMap, symbolizers: Symbolizers):
        self.module_map = module_map
        self.symbolizers = symbolizers
        #: (module, name) -> (whether global, the module's address of it), or None
        self._named: Dict[Tuple[Module, str], Optional[Tuple[bool, int]]] = {}

    def between(self, caller_pc: int, callee_pc: int, unique: bool = False) -> List[int]:
        """The PCs of the tail-call frames between a caller frame whose PC
        (a return address) is ``caller_pc`` and the frame whose lookup PC
        (sfbt.unwind.walk.lookup_pc) is ``callee_pc``, innermost first;
        [] for none.  GDB's chain, or with ``unique`` LLDB's one path."""
        try:
            site = self._site(caller_pc)
            entry = self._function_start(callee_pc)
            if site is None or entry is None:
                return []
            if unique:
                if site[1].nested:
                    return []
                return [bias + site.pc for bias, site in reversed(self._path(site, entry))]
            return _frames(self._chain(site, entry))
        except _NoChain:
            return []

    # -- what GDB finds by address ----------------------------------------------------------

    def _symbols(self, pc: int) -> Tuple[int, Optional["FileSymbolizer"]]:
        """(load bias, FileSymbolizer or None) of the module holding pc."""
        module = self.module_map.module_for(pc)
        if module is None:
            return 0, None
        return module.load_bias, self.symbolizers.symbols(module)

    def _site(self, return_pc: int) -> Optional[Placed]:
        """The call site returning to ``return_pc``, looked for in the unit
        holding the call (return_pc - 1: a call may end its unit)."""
        bias, symbols = self._symbols(return_pc - 1)
        if symbols is None:
            return None
        site = symbols.call_sites(return_pc - 1 - bias).sites.get(return_pc - bias)
        return (bias, site) if site is not None else None

    def _function_start(self, pc: int) -> Optional[int]:
        """The entry of the function holding ``pc``: its DWARF function's,
        else its minimal symbol's (GDB's get_pc_function_start)."""
        bias, symbols = self._symbols(pc)
        if symbols is None:
            return None
        entry = symbols.call_sites(pc - bias).function_entry(pc - bias)
        if entry is None:
            table = symbols.function_table()
            index = table.best(pc - bias)
            entry = table.starts[index] if index is not None else None
        return entry + bias if entry is not None else None

    def _tail_calls_of(self, entry: int) -> List[Placed]:
        """The tail calls of the DWARF function that starts at ``entry``,
        if it lists them all; _NoChain when no DWARF function starts there."""
        bias, symbols = self._symbols(entry)
        sites = symbols.call_sites(entry - bias) if symbols is not None else None
        if sites is None or sites.function_entry(entry - bias) != entry - bias:
            raise _NoChain
        return [(bias, site) for site in sites.tail_calls.get(entry - bias, ())]

    def _addresses(self, placed: Placed) -> Tuple[int, ...]:
        """The run-time addresses a call site calls; _NoChain where they
        are unknown (an indirect call, a name no module defines)."""
        bias, site = placed
        target: Target = site.target
        if target is None:
            raise _NoChain
        if isinstance(target, str):
            return (self._named_address(target),)
        return tuple(address + bias for address in target)

    def _named_address(self, name: str) -> int:
        """The address of GDB's minimal symbol ``name``: it looks in its
        objfiles in order (the program, then its libraries) and takes the
        first global symbol it finds, else the last local one."""
        local = None
        for module in self.module_map.modules:
            key = (module, name)
            if key not in self._named:
                symbols = self.symbolizers.symbols(module)
                found = symbols.symbol_address(name) if symbols is not None else None
                self._named[key] = (found[0], found[1] + module.load_bias) \
                    if found is not None else None
            placed = self._named[key]
            if placed is not None:
                if placed[0]:
                    return placed[1]
                local = placed[1]
        if local is None:
            raise _NoChain
        return local

    # -- the search -------------------------------------------------------------------------

    def _chain(self, first: Placed, callee: int) -> "_Chain":
        """GDB's chain of the tail calls between the call site ``first``
        and the function starting at ``callee``."""
        result = _Chain()
        path: List[Placed] = []
        on_path: Set[int] = set()
        visits = [0]

        def search(placed: Placed) -> bool:
            """False to stop the search (the chain is already ambiguous)."""
            addresses = self._addresses(placed)
            if callee in addresses:
                return result.intersect([bias + site.pc for bias, site in path])
            for address in addresses:
                for tail in self._tail_calls_of(address):
                    pc = tail[0] + tail[1].pc
                    if pc in on_path:
                        continue
                    visits[0] += 1
                    if visits[0] > MAX_VISITS or len(path) >= MAX_DEPTH:
                        raise _NoChain
                    path.append(tail)
                    on_path.add(pc)
                    if not search(tail):
                        return False
                    on_path.discard(pc)
                    path.pop()
            return True

        search(first)
        if result.pcs is None:
            raise _NoChain
        return result


    def _path(self, first: Placed, callee: int) -> List[Placed]:
        """LLDB's path of tail calls from the call site ``first`` to the
        function starting at ``callee``: the one path, [] when there is
        none; _NoChain when there are two or a function is reached twice."""
        found: List[List[Placed]] = []
        path: List[Placed] = []
        reached: Set[int] = set()
        visits = [0]

        def search(placed: Placed) -> None:
            try:
                addresses = self._addresses(placed)
            except _NoChain:  # a call LLDB cannot resolve: no path through it
                return
            for address in addresses:
                if address == callee:
                    if found:
                        raise _NoChain
                    found.append(list(path))
                    continue
                if address in reached:
                    raise _NoChain
                reached.add(address)
                try:
                    tails = self._tail_calls_of(address)
                except _NoChain:  # no DWARF function there: no calls out of it
                    continue
                for tail in tails:
                    if tail[1].nested:
                        continue
                    visits[0] += 1
                    if visits[0] > MAX_VISITS or len(path) >= MAX_DEPTH:
                        raise _NoChain
                    path.append(tail)
                    search(tail)
                    path.pop()

        if callee in self._addresses(first):
            return []  # a direct call
        search(first)
        return found[0] if found else []


class _Chain:
    """The intersection of the paths found (GDB's chain_candidate):
    ``pcs`` of the first path (None before one, or once they share
    nothing), ``callers`` of them shared by every path from the caller's
    end, ``callees`` from the callee's."""

    def __init__(self) -> None:
        self.pcs: Optional[List[int]] = None
        self.started = False
        self.callers = self.callees = 0

    def intersect(self, pcs: List[int]) -> bool:
        """Take in one more path; False once no path can be kept."""
        if not self.started:
            self.started = True
            self.pcs = pcs
            self.callers = self.callees = len(pcs)
            return True
        if self.pcs is None:
            return False
        mine = self.pcs
        length = min(self.callers, len(pcs))
        self.callers = next((i for i in range(length) if mine[i] != pcs[i]), length)
        length = min(self.callees, len(pcs))
        self.callees = next((i for i in range(length) if mine[-1 - i] != pcs[-1 - i]), length)
        if self.callers == 0 and self.callees == 0:
            self.pcs = None
            return False
        return True


def _frames(chain: _Chain) -> List[int]:
    """The PCs of the frames a chain shows, innermost first: the calls
    shared from the callee's end, then, unless those are all of them, the
    calls shared from the caller's end (GDB's pretend_pc)."""
    pcs = chain.pcs or []
    frames = [pcs[len(pcs) - 1 - i] for i in range(chain.callees)]
    if chain.callees != len(pcs):
        frames += [pcs[chain.callers - 1 - i] for i in range(chain.callers)]
    return frames
