"""The note types and layouts of a Linux core file that both of sfbt's
core readers read (live.corefile, a core on disk; crashes.streamed, a core
on the kernel's pipe): what a note's type number says, and where in
NT_PRSTATUS and NT_PRPSINFO (the same on every 64-bit Linux) each field
is.  Kept apart from either reader so that the crash handler imports
nothing more than these numbers."""

ET_CORE = 4
#: an ELF64 program header: p_type, p_flags, p_offset, p_vaddr, p_paddr,
#: p_filesz, p_memsz, p_align (without its byte order)
PHDR_FORMAT = "IIQQQQQQ"
NT_PRSTATUS = 1
NT_PRPSINFO = 3
NT_AUXV = 6
NT_SIGINFO = 0x53494749
NT_FILE = 0x46494C45
#: the pointer-authentication masks of an AArch64 core (a "LINUX" note)
NT_ARM_PAC_MASK = 0x406
AT_PHDR = 3
AT_PAGESZ = 6
AT_BASE = 7
AT_ENTRY = 9
AT_EXECFN = 31
AT_SYSINFO_EHDR = 33
#: p_flags of a writable segment
PF_W = 2
#: offsets in struct elf_prpsinfo of pr_uid (then pr_gid), pr_pid and
#: pr_fname (16 bytes)
PRPSINFO_UID = 16
PRPSINFO_PID = 24
PRPSINFO_FNAME = 40
#: offsets in struct elf_prstatus of the signal (pr_cursig), pr_pid and
#: pr_reg (the register set, Arch.regset), and the bytes of pr_fpvalid
#: and padding after pr_reg
PRSTATUS_SIGNAL = 12
PRSTATUS_PID = 32
PRSTATUS_REGISTERS = 112
PRSTATUS_TAIL = 8
