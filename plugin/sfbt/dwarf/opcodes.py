"""Numbers of the DWARF call-frame format (DWARF 5 section 6.4, the LSB's
.eh_frame): CFA instructions, the expression operations sfbt recognises,
and .eh_frame pointer encodings."""

# -- call frame instructions (DW_CFA_*) --------------------------------------
# Three "primary" opcodes keep their operand in the low 6 bits.
DW_CFA_advance_loc = 0x40
DW_CFA_offset = 0x80
DW_CFA_restore = 0xC0
PRIMARY_MASK = 0xC0
PRIMARY_OPERAND = 0x3F

DW_CFA_nop = 0x00
DW_CFA_set_loc = 0x01
DW_CFA_advance_loc1 = 0x02
DW_CFA_advance_loc2 = 0x03
DW_CFA_advance_loc4 = 0x04
DW_CFA_offset_extended = 0x05
DW_CFA_restore_extended = 0x06
DW_CFA_undefined = 0x07
DW_CFA_same_value = 0x08
DW_CFA_register = 0x09
DW_CFA_remember_state = 0x0A
DW_CFA_restore_state = 0x0B
DW_CFA_def_cfa = 0x0C
DW_CFA_def_cfa_register = 0x0D
DW_CFA_def_cfa_offset = 0x0E
DW_CFA_def_cfa_expression = 0x0F
DW_CFA_expression = 0x10
DW_CFA_offset_extended_sf = 0x11
DW_CFA_def_cfa_sf = 0x12
DW_CFA_def_cfa_offset_sf = 0x13
DW_CFA_val_offset = 0x14
DW_CFA_val_offset_sf = 0x15
DW_CFA_val_expression = 0x16
# DW_CFA_GNU_window_save on SPARC: AArch64 gives it this meaning.
DW_CFA_AARCH64_negate_ra_state = 0x2D
DW_CFA_GNU_args_size = 0x2E
DW_CFA_GNU_negative_offset_extended = 0x2F

# -- expression operations (DW_OP_*) ------------------------------------------
DW_OP_deref = 0x06
DW_OP_consts = 0x11
DW_OP_and = 0x1A
DW_OP_plus = 0x22
DW_OP_plus_uconst = 0x23
DW_OP_shl = 0x24
DW_OP_ge = 0x2A
DW_OP_lit0 = 0x30
DW_OP_lit31 = 0x4F
DW_OP_breg0 = 0x70
DW_OP_breg31 = 0x8F
DW_OP_bregx = 0x92
DW_OP_call_frame_cfa = 0x9C

# -- .eh_frame pointer encodings (DW_EH_PE_*) -----------------------------------
DW_EH_PE_absptr = 0x00
DW_EH_PE_uleb128 = 0x01
DW_EH_PE_udata2 = 0x02
DW_EH_PE_udata4 = 0x03
DW_EH_PE_udata8 = 0x04
DW_EH_PE_sleb128 = 0x09
DW_EH_PE_sdata2 = 0x0A
DW_EH_PE_sdata4 = 0x0B
DW_EH_PE_sdata8 = 0x0C
DW_EH_PE_pcrel = 0x10
DW_EH_PE_datarel = 0x30
DW_EH_PE_aligned = 0x50
DW_EH_PE_indirect = 0x80
DW_EH_PE_omit = 0xFF
DW_EH_PE_FORMAT_MASK = 0x0F
DW_EH_PE_APPLICATION_MASK = 0x70
