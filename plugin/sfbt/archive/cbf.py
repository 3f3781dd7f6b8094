"""Compact Backtrace Format (CBF), version 0: Swift's byte code for one
backtrace.

Layout: an info byte ``version << 2 | size`` (size 0, 1, 2: 16-, 32-,
64-bit machine words), then instructions, the last one ``end`` or ``trunc``::

    0000000t                 end (t = 0) or trunc (t = 1)
    0001annn  n+1 bytes      pc     \\  the address bytes are big-endian and
    0010annn  n+1 bytes      ra      > sign-extended to the word; a = 1: the
    0011annn  n+1 bytes      async  /  address, a = 0: a delta from the last one
    010ccccc                 omit c+1 frames
    011nnnnn  n+1 bytes      omit that many frames (zero-extended count)
    10000ccc                 rep: the previous frame c+1 more times
    10001nnn  n+1 bytes      rep: the previous frame that many more times

The address a delta starts from is 0 before the first address.  Every
other byte is reserved.  Address arithmetic wraps at the word size.

Smallest encoding
-----------------
``encode`` writes the fewest bytes of any input that ``decode`` (strict)
turns into the same frames and truncation with the first address
absolute: info byte, instructions with fields no wider than the word and
counts above zero, and a final ``end`` or ``trunc``.

After the decoder has produced entries ``0..i`` its state (the last
address, the previous entry, whether an address was seen) depends on
those entries only, never on how they were written, and every instruction
produces at least one entry.  So an encoding is the info byte, one
independent piece per entry or run of equal entries, and the terminator,
and the total is smallest when each piece is:

- a frame: one instruction, ``1 + min(absolute, delta)`` bytes, each the
  fewest big-endian bytes whose sign extension gives the value (the delta
  is not allowed for the first address); on a tie the delta, as Swift;
- an omitted count n: one instruction, 1 byte if n <= 32, else
  ``1 + bytes(n)``;
- k further copies of the previous entry: a copy written out costs at
  least 1 byte, as much as a ``rep`` of one copy, so reps alone will do.
  k <= 8: one inline ``rep``, 1 byte.  k > 8: one external ``rep``,
  ``1 + bytes(k)`` bytes.  Nothing beats it: j inline reps alone cover at
  most 8j copies, and reps with external counts v_1..v_m (m >= 1) plus j
  inline ones cost m + sum(bytes(v_i)) + j >= 1 + bytes(k), because
  bytes() is subadditive, grows with its argument, and bytes(8j) <= j.
  A count must fit the word, so while k exceeds 0xffff a 16-bit trace
  first spends full external reps of 0xffff (replacing two external reps
  by a full one and the rest never costs more, so an optimal cover has at
  most one external rep that is not full).

tests/test_cbf.py compares the output with a search over every instruction
form on short traces.
"""

from operator import itemgetter

from ..errors import EncodeError, LocatedError, SfbtError

VERSION = 0
WORD_SIZES = (16, 32, 64)  # index = the info byte's size field

OP_END = 0x00
OP_TRUNC = 0x01
OP_PC = 0x10
OP_RA = 0x20
OP_ASYNC = 0x30
ADDRESS_ABSOLUTE = 0x08
OP_OMIT = 0x40
OMIT_EXTERNAL = 0x20
OP_REP = 0x80
REP_EXTERNAL = 0x08
OP_RESERVED = 0x90  # this and every byte above it

MAX_INLINE_OMIT = 32
MAX_INLINE_REP = 8

KINDS = ("pc", "ra", "async")
_KIND_OPCODES = {"pc": OP_PC, "ra": OP_RA, "async": OP_ASYNC}
_OPCODE_KINDS = {op: kind for kind, op in _KIND_OPCODES.items()}
#: (kind, argument bytes, whether absolute) of each address opcode
_ADDRESS_OPCODES = {op | flags | size: (kind, size + 1, bool(flags))
                    for op, kind in _OPCODE_KINDS.items()
                    for flags in (0, ADDRESS_ABSOLUTE) for size in range(8)}

DEFAULT_LIMIT = 1 << 20  # frames decode() expands before giving up


class CBFError(LocatedError):
    """Malformed CBF data, located by byte offset: ``CBF+0x3: ...``."""

    default_where = "CBF"


class FrameTextError(SfbtError):
    """Malformed text for `sfbt cbf encode`; the message names the line."""


class Frame(tuple):
    """A frame: ``kind`` "pc" (a program counter, e.g. the innermost frame),
    "ra" (a return address) or "async" (an async resume point), and its
    ``address``.  A tuple (kind, address), so that a frame is made and
    hashed without a call into Python: an archive decodes millions, and
    its readers remember what they print per frame."""

    __slots__ = ()

    def __new__(cls, kind, address):
        if kind not in KINDS:
            raise EncodeError(f"unknown frame kind {kind!r} "
                             f"(expected one of {', '.join(KINDS)})")
        if address < 0:
            raise EncodeError(f"negative address {address:#x}")
        return tuple.__new__(cls, (kind, address))

    kind = property(itemgetter(0))
    address = property(itemgetter(1))

    @property
    def lookup_address(self):
        """The address whose function and line the frame is at, as every
        reader looks it up: a return address one byte back, inside the
        call (the call may be its function's last instruction; a zero
        one, of a smashed stack, as it is); a PC (where execution
        stopped, or a signal interrupted it) and an async resume point
        (a function's entry) themselves.  (A frame that is the kernel's
        signal trampoline is read as a SignalTrampoline: signal_trampolines.)"""
        kind, address = self
        return address - 1 if kind == "ra" and address else address

    def __getnewargs__(self):
        return tuple(self)

    def __repr__(self):
        return f"Frame(kind={self[0]!r}, address={self[1]!r})"


class SignalTrampoline(tuple):
    """A trace's frame that its readers take for the kernel's signal
    trampoline (signal_trampolines): printed as sframe-bt prints it, and
    looked up at its ``address`` itself, the trampoline's first byte
    (where the handler returns to), not one byte before it (the end of
    whatever function the trampoline follows).  A tuple ("signal",
    address): a reader remembers what it prints per entry, and a
    trampoline's differs from that of a return address at the same
    address."""

    __slots__ = ()

    def __new__(cls, address):
        return tuple.__new__(cls, ("signal", address))

    address = property(itemgetter(1))
    lookup_address = address

    def __repr__(self):
        return f"SignalTrampoline(address={self[1]!r})"


def signal_trampolines(entries, following=None):
    """``entries`` (Frame and Omitted entries, innermost first) with each
    frame that is the kernel's signal trampoline a SignalTrampoline; the
    entries themselves where there is none.  ``following``: the entry
    that comes after the last one (the next part of the same trace), or
    None.

    CBF has no frame kind or flag for a trampoline, so its frame is told
    by the kinds: a ``pc`` frame after frame #0 is one a signal
    interrupted (its PC had not run yet), and the frame directly inside
    it, the entry before, is the trampoline the kernel made it return
    through (a return address into the trampoline, or a PC where
    execution stopped in it).  cbf-save, `sfbt stack` and `sfbt record`
    write just that; Swift's backtracers write ``pc`` for frame #0 alone
    and lws lines hold return addresses, so no frame of theirs is taken
    for one.  An ``omit`` before a ``pc`` frame leaves the trampoline out
    with the frames it omits (docs/archive.md)."""
    marked = None
    after = following
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if (after.__class__ is Frame and after[0] == "pc"
                and entry.__class__ is Frame):
            if marked is None:
                marked = list(entries)
            marked[index] = SignalTrampoline(entry[1])
        after = entry
    return entries if marked is None else marked


def read_entries(entries, following=None, kernel=None):
    """``entries`` as every reader takes them, from what their kinds say:
    the kernel's signal trampoline marked (signal_trampolines, with
    ``following``), and the user frame below a trace's kernel frames
    looked up at itself (kernel_entries, with ``kernel``)."""
    return kernel_entries(signal_trampolines(entries, following), kernel)


def kernel_entries(entries, kernel):
    """``entries`` (after signal_trampolines) with the user frame where
    the kernel's frames end, the thread's PC as it entered the kernel, a
    ``pc`` Frame: looked up at itself, as perf and GDB's frame #0 look it
    up (an interrupted instruction, or the one a system call returns
    to), where it was written as a return address so that no reader
    takes the kernel's frame above it for a signal trampoline.
    ``kernel``: (start, end) of the kernel's addresses in the trace's
    image map (kernel_range), or None (a trace of user frames only)."""
    if kernel is None:
        return entries
    index = 0
    for entry in entries:
        if not _in_kernel(entry, kernel):
            break
        index += 1
    if 0 < index < len(entries) and entries[index].__class__ is Frame \
            and entries[index][0] == "ra":
        marked = list(entries)
        marked[index] = Frame("pc", entries[index][1])
        return marked
    return entries


def enters_kernel_at_callers(frames, callers, kernel):
    """Whether a trace's kernel frames end just where its ``callers``
    (Backtrace.callers) begin: the callers' first frame is then named as
    kernel_entries names it, not as the callers other traces share."""
    if kernel is None or not callers or len(frames) <= len(callers):
        return False
    outer = callers[0]
    return (_in_kernel(frames[-len(callers) - 1], kernel)
            and outer.__class__ is Frame and not _in_kernel(outer, kernel))


def _in_kernel(entry, kernel):
    """Whether ``entry`` is a frame at one of the ``kernel`` addresses."""
    return entry.__class__ is Frame and kernel[0] <= entry[1] < kernel[1]


class Omitted:
    """``count`` frames left out of the trace.  (Plain classes here and in
    imagemap, store and save rather than dataclasses, whose import is a
    sixth of the crash handler's time.)"""

    __slots__ = ("count",)

    def __init__(self, count: int):
        if count < 1:
            raise EncodeError(f"omitted frame count {count} is not positive")
        object.__setattr__(self, "count", count)

    def __setattr__(self, name, value):
        raise AttributeError(f"Omitted is immutable: cannot set {name}")

    def __eq__(self, other):
        return type(other) is Omitted and other.count == self.count

    def __hash__(self):
        return hash((Omitted, self.count))

    def __repr__(self):
        return f"Omitted(count={self.count!r})"


class Backtrace:
    """A decoded trace: Frame and Omitted entries, repeats written out.
    ``over_limit``: decoding stopped at its frame limit; ``callers``: the
    entries after the first (the callers' frames) as a tuple that other
    traces of an archive with the same ones share (TraceDecoder), else ()
    (not compared)."""

    __slots__ = ("frames", "truncated", "word_size", "over_limit", "callers")

    def __init__(self, frames=None, truncated: bool = False, word_size: int = 64,
                 over_limit: bool = False, callers: tuple = ()):
        self.frames = [] if frames is None else frames
        self.truncated = truncated
        self.word_size = word_size
        self.over_limit = over_limit
        self.callers = callers

    def _compared(self):
        return (self.frames, self.truncated, self.word_size, self.over_limit)

    def __eq__(self, other):
        if type(other) is not Backtrace:
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self):
        return (f"Backtrace(frames={self.frames!r}, truncated={self.truncated!r}, "
                f"word_size={self.word_size!r}, over_limit={self.over_limit!r})")


def _unsigned_length(value):
    return max(1, (value.bit_length() + 7) // 8)


def _word_size_code(word_size):
    if word_size not in WORD_SIZES:
        raise EncodeError(f"word size {word_size} is not one of 16, 32, 64")
    return WORD_SIZES.index(word_size)


def encode(frames, word_size=64, truncated=False):
    """The smallest CBF bytes for ``frames``: Omitted entries and frames,
    each a Frame or any (kind, address) pair (what `sfbt record` writes
    per sample: one loop, no object per frame)."""
    bits = word_size
    out = bytearray([VERSION << 2 | _word_size_code(bits)])
    last_address = None
    previous, run = None, 0  # the entry written last, and its copies since
    for entry in frames:
        if run and entry == previous:
            run += 1
            continue
        if run > 1:
            _write_repeats(out, run - 1, bits)
        if entry.__class__ is Omitted:
            _write_omit(out, entry.count, bits)
        else:
            last_address = _write_frame(out, entry, last_address, bits)
        previous, run = entry, 1
    if run > 1:
        _write_repeats(out, run - 1, bits)
    out.append(OP_TRUNC if truncated else OP_END)
    return bytes(out)


class Encoder:
    """encode() an entry at a time, for entries read as they come: each
    is written when it differs from the one before, a run of equal ones
    as one ``rep`` when the run ends."""

    def __init__(self, word_size=64):
        self.word_size = word_size
        self._out = bytearray([VERSION << 2 | _word_size_code(word_size)])
        self._last_address = None  # None until the first address is written
        self._entry = None  # the entry of the run being counted
        self._run = 0  # its length
        self._count = 0  # entries added

    def add(self, entry):
        run = self._run
        if run:
            if entry == self._entry:
                self._run = run + 1
                return
            if run > 1:  # a run of one ends with nothing written
                self._end_run()
        if isinstance(entry, Frame):
            self._last_address = _write_frame(self._out, entry, self._last_address,
                                              self.word_size)
        elif isinstance(entry, Omitted):
            _write_omit(self._out, entry.count, self.word_size)
        else:
            raise TypeError(f"frame {self._count} is a {type(entry).__name__}, "
                            "not a Frame or Omitted")
        self._count += 1
        self._entry, self._run = entry, 1

    def _end_run(self):
        if self._run:
            self._count += self._run - 1
            _write_repeats(self._out, self._run - 1, self.word_size)
        self._run = 0

    def finish(self, truncated=False):
        """The bytes of the entries added, then ``trunc`` or ``end``."""
        self._end_run()
        return bytes(self._out) + bytes([OP_TRUNC if truncated else OP_END])


def _write_frame(out, frame, last_address, bits):
    """Write a (kind, address) pair; its address (the next delta's start)."""
    try:
        kind, address = frame
        opcode = _KIND_OPCODES[kind]
    except (TypeError, ValueError):
        raise TypeError(f"{frame!r} is not a frame (kind, address) or Omitted") from None
    except KeyError:
        raise EncodeError(f"unknown frame kind {kind!r} "
                         f"(expected one of {', '.join(KINDS)})") from None
    if address >> bits or address < 0:
        raise EncodeError(f"address {address:#x} does not fit a "
                         f"{bits}-bit word")
    # _signed_length, inline: the fewest bytes whose sign extension to
    # ``bits`` gives the value
    top = bits - 1
    absolute = (address if not address >> top else ~(address - (1 << bits))
                ).bit_length() // 8 + 1
    if last_address is None:
        value, length, flag = address, absolute, ADDRESS_ABSOLUTE
    else:
        delta = (address - last_address) & ((1 << bits) - 1)
        relative = (delta if not delta >> top else ~(delta - (1 << bits))
                    ).bit_length() // 8 + 1
        if absolute < relative:
            value, length, flag = address, absolute, ADDRESS_ABSOLUTE
        else:
            value, length, flag = delta, relative, 0
    out.append(opcode | flag | (length - 1))
    out += (value & ((1 << 8 * length) - 1)).to_bytes(length, "big")
    return address


def _write_external(out, opcode, value):
    length = _unsigned_length(value)
    out.append(opcode | (length - 1))
    out += value.to_bytes(length, "big")


def _write_omit(out, count, bits):
    if count >> bits:
        raise EncodeError(f"omitted frame count {count} does not fit a "
                         f"{bits}-bit word")
    if count <= MAX_INLINE_OMIT:
        out.append(OP_OMIT | (count - 1))
    else:
        _write_external(out, OP_OMIT | OMIT_EXTERNAL, count)


def _write_repeats(out, count, bits):
    largest = (1 << bits) - 1
    while count > largest:  # 16-bit words only
        _write_external(out, OP_REP | REP_EXTERNAL, largest)
        count -= largest
    if count > MAX_INLINE_REP:
        _write_external(out, OP_REP | REP_EXTERNAL, count)
    elif count:
        out.append(OP_REP | (count - 1))


def decode(data: bytes, strict: bool = True, limit: int = DEFAULT_LIMIT) -> "Backtrace":
    """A Backtrace from CBF bytes.

    strict: malformed data raises CBFError.  Otherwise, as Swift's decoder,
    the frames before the first error come back with truncated set, and
    anything after ``end``/``trunc`` is ignored.  A delta first address (as
    Swift's encoder writes it) is accepted either way.  More than ``limit``
    frames is an error: a few bytes of ``rep`` can ask for 2**64 of them.
    """
    reader = _Reader(bytes(data), limit)
    try:
        reader.read()
        if strict and reader.position < len(reader.data):
            raise CBFError(f"{len(reader.data) - reader.position} bytes after "
                           "the end of the trace", reader.position)
    except CBFError:
        if strict:
            raise
        reader.truncated = True
    return Backtrace(reader.frames, reader.truncated, reader.word_size, reader.over_limit)


class TraceDecoder:
    """decode(data, strict=False, limit) for the many traces of an archive,
    remembering what the traces share.

    Samples taken in one function differ in their first frame (the PC)
    and share their callers: the second frame and the bytes after it
    decode to the same entries whenever it is the same frame (a delta
    counts from its address, a rep repeats it), so those entries are
    decoded once per (info byte, second frame, bytes) and kept, at most
    MAX_KEPT entries in all.  Only bytes that decode without an error are
    kept; any other trace is decoded on its own."""

    MAX_KEPT = 1 << 18

    def __init__(self):
        self._callers = {}  # (info byte, second frame, bytes) -> (entries, truncated)
        self._kept = 0

    def decode(self, data, limit=DEFAULT_LIMIT):
        head = _two_frames(data)
        if head is None:
            return decode(data, strict=False, limit=limit)
        word_size, first, second, at = head
        key = (data[0], second, data[at:])
        kept = self._callers.get(key)
        if kept is None:
            try:
                decoded = decode(data, limit=limit)
            except CBFError:
                return decode(data, strict=False, limit=limit)
            callers = tuple(decoded.frames[1:])
            if self._keep(key, callers, decoded.truncated):
                decoded.callers = callers
            return decoded
        callers, truncated = kept
        if len(callers) + 1 > limit:
            return decode(data, strict=False, limit=limit)
        return Backtrace([first, *callers], truncated, word_size, callers=callers)

    def _keep(self, key, callers, truncated):
        """Whether the callers are kept."""
        if len(callers) > self.MAX_KEPT:
            return False
        if self._kept + len(callers) > self.MAX_KEPT:
            self._callers.clear()
            self._kept = 0
        self._callers[key] = (callers, truncated)
        self._kept += len(callers)
        return True


#: (word size, mask) of each valid info byte
_WORDS = {info: (WORD_SIZES[info & 3], (1 << WORD_SIZES[info & 3]) - 1)
          for info in range(256) if info & 3 != 3 and info >> 2 == VERSION}


def _two_frames(data):
    """(word size, first frame, second frame, offset of the next
    instruction) of a trace that starts with two address instructions
    (read as _Reader.read reads them), else None."""
    word = _WORDS.get(data[0]) if data else None
    if word is None:
        return None
    word_size, mask = word
    size, from_bytes = len(data), int.from_bytes
    # the first: absolute or a delta from 0 alike
    operation = _ADDRESS_OPCODES.get(data[1]) if size > 1 else None
    if operation is None:
        return None
    kind, length, _ = operation
    end = 2 + length
    if length * 8 > word_size or end > size:
        return None
    first = from_bytes(data[2:end], "big", signed=True) & mask
    at = end
    operation = _ADDRESS_OPCODES.get(data[at]) if size > at else None
    if operation is None:
        return None
    second_kind, length, absolute = operation
    end = at + 1 + length
    if length * 8 > word_size or end > size:
        return None
    value = from_bytes(data[at + 1:end], "big", signed=True)
    second = (value if absolute else value + first) & mask
    return (word_size, tuple.__new__(Frame, (kind, first)),
            tuple.__new__(Frame, (second_kind, second)), end)


class _Reader:
    def __init__(self, data, limit):
        self.data = data
        self.limit = limit
        self.position = 0
        self.frames = []
        self.truncated = False
        self.over_limit = False
        self.word_size = 64  # until the info byte says otherwise

    def take(self, count, what, at):
        end = self.position + count
        if end > len(self.data):
            raise CBFError(f"data ends inside {what} ({len(self.data) - self.position} "
                           f"of {count} bytes)", at)
        chunk = self.data[self.position:end]
        self.position = end
        return chunk

    def argument(self, opcode, length_mask, what, at):
        """The argument bytes of an instruction, at most a word of them."""
        length = (opcode & length_mask) + 1
        if length * 8 > self.word_size:
            raise CBFError(f"{what} of {length} bytes is wider than a "
                           f"{self.word_size}-bit word", at)
        return self.take(length, what, at)

    def count(self, opcode, length_mask, what, at):
        value = int.from_bytes(self.argument(opcode, length_mask, what, at), "big")
        if not value:
            raise CBFError(f"{what} is zero", at)
        return value

    def read(self):
        if not self.data:
            raise CBFError("no data, not even the info byte", 0)
        info = self.data[0]
        self.position = 1
        if info & 3 == 3:
            raise CBFError(f"info byte {info:#04x} has the reserved word "
                           "size 3", 0)
        if info >> 2 != VERSION:
            raise CBFError(f"unsupported CBF version {info >> 2}", 0)
        self.word_size = WORD_SIZES[info & 3]
        mask = (1 << self.word_size) - 1
        word_bytes = self.word_size // 8
        data, frames, limit = self.data, self.frames, self.limit
        size = len(data)
        new, from_bytes, append = tuple.__new__, int.from_bytes, frames.append
        address_ops = _ADDRESS_OPCODES
        address = 0
        previous = None
        position = 1
        while True:
            at = position
            if at == size:
                self.position = position
                raise CBFError("data ends without end or trunc", at)
            opcode = data[at]
            position += 1
            repeat = 1
            if opcode <= OP_TRUNC:
                self.position = position
                self.truncated = opcode == OP_TRUNC
                return
            operation = address_ops.get(opcode)
            if operation is not None:
                kind, length, absolute = operation
                end = position + length
                if length > word_bytes or end > size:
                    self.position = position
                    self.argument(opcode, 0x07, f"the {kind} address", at)  # raises the error
                value = from_bytes(data[position:end], "big", signed=True)
                position = end
                address = (value if absolute else value + address) & mask
                # A Frame known to be valid, without the checks of its
                # constructor (decoding makes millions).
                entry = new(Frame, (kind, address))
                if len(frames) >= limit:
                    self.position = position
                    self.over_limit = True
                    raise CBFError(f"more than {limit} frames", at)
                append(entry)
                previous = entry
                continue
            self.position = position
            if OP_OMIT <= opcode < OP_REP:
                if opcode & OMIT_EXTERNAL:
                    entry = Omitted(self.count(opcode, 0x1F, "the omit count", at))
                else:
                    entry = Omitted((opcode & 0x1F) + 1)
            elif OP_REP <= opcode < OP_RESERVED:
                if previous is None:
                    raise CBFError("rep with no previous frame", at)
                entry = previous
                if opcode & REP_EXTERNAL:
                    repeat = self.count(opcode, 0x07, "the rep count", at)
                else:
                    repeat = (opcode & 0x07) + 1
            else:
                raise CBFError(f"reserved opcode {opcode:#04x}", at)
            position = self.position
            if len(frames) + repeat > limit:
                self.position = position
                self.over_limit = True
                raise CBFError(f"more than {limit} frames", at)
            if repeat == 1:
                frames.append(entry)
            else:
                frames.extend([entry] * repeat)
            previous = entry


def format_frames(trace):
    """Text with one line per frame (``pc 0x401000``, ``omit 5``), then
    ``truncated`` if the trace was cut short."""
    lines = [f"{entry.kind} {entry.address:#x}" if isinstance(entry, Frame)
             else f"omit {entry.count}" for entry in trace.frames]
    if trace.truncated:
        lines.append("truncated")
    return "".join(line + "\n" for line in lines)


def parse_frames(text):
    """(frames, truncated) from format_frames' text; blank lines are ignored.

    Numbers may be hex (0x...) or decimal.  Errors name the line."""
    parsed = FrameText(text.splitlines())
    frames = list(parsed)
    return frames, parsed.truncated


class FrameText:
    """The entries of format_frames' text, read a line at a time from
    ``lines``: iterating gives the Frame and Omitted entries, and then
    ``truncated`` says whether the text ended with ``truncated``.  More
    than ``limit`` entries (what decode() reads back) is an error."""

    def __init__(self, lines, limit=None):
        self.lines = lines
        self.limit = limit
        self.truncated = False

    def __iter__(self):
        count = 0
        for number, line in enumerate(self.lines, 1):
            words = line.split()
            if not words:
                continue
            if self.truncated:
                raise FrameTextError(f"line {number}: {line.strip()!r} after 'truncated'")
            if words == ["truncated"]:
                self.truncated = True
                continue
            if len(words) != 2 or words[0] not in KINDS + ("omit",):
                raise FrameTextError(f"line {number}: expected 'pc|ra|async ADDRESS', "
                                     f"'omit COUNT' or 'truncated', not {line.strip()!r}")
            count += 1
            if self.limit is not None and count > self.limit:
                raise FrameTextError(f"line {number}: more than {self.limit} frames "
                                     "(as many as a trace is decoded with)")
            kind, value_text = words
            try:
                value = int(value_text, 0)
                entry = Omitted(value) if kind == "omit" else Frame(kind, value)
            except ValueError as error:
                raise FrameTextError(f"line {number}: {error}") from None
            yield entry
