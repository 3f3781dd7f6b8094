"""A Target over a synthetic memory image, for unwinder unit tests."""

from sfbt.errors import TargetMemoryError
from sfbt.unwind.modules import ModuleMap, SFrameSource
from sfbt.unwind.target import Module, Target


class SyntheticTarget(Target):
    def __init__(self, arch, registers, sections=(), memory=None):
        self.arch = arch
        self._registers = dict(registers)
        self.memory = dict(memory or {})  # address -> byte
        self._modules = []
        self._sections = {}
        for path, start, end, section in sections:
            module = Module(path, 0, start, end, build_id=path)
            self._modules.append(module)
            self._sections[path] = section

    def write_word(self, address, value):
        size = self.arch.pointer_size
        order = "big" if self.arch.big_endian else "little"
        for i, byte in enumerate(value.to_bytes(size, order)):
            self.memory[address + i] = byte

    def write_bytes(self, address, data):
        for i, byte in enumerate(data):
            self.memory[address + i] = byte

    def read_memory(self, address, size):
        try:
            return bytes(self.memory[address + i] for i in range(size))
        except KeyError:
            raise TargetMemoryError(address, size) from None

    def registers(self):
        return self._registers

    def modules(self):
        return self._modules

    def module_map(self):
        return ModuleMap(self._modules, self, _GivenSections(self._sections))


class _GivenSections:
    """The modules' SFrame data: the sections the test gave, by path."""

    synthesize = False

    def __init__(self, sections):
        self._sections = sections

    def for_module(self, module, target=None):
        return SFrameSource(self._sections[module.path], "file")

    own = for_module
