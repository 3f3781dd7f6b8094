# x86-64 CFI that SFrame cannot say, for the synthesis tests: rows with an
# arbitrary DWARF expression are left out.  Assembled, never run.
	.text
	.globl	deref_plus
	.type	deref_plus, @function
deref_plus:
	.cfi_startproc
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	# CFA = *(rsp + 0) + 16: DW_OP_breg7 0; DW_OP_deref; DW_OP_plus_uconst 16
	.cfi_escape 0xf,0x5,0x77,0x00,0x06,0x23,0x10
	nop
	.cfi_def_cfa rsp, 16
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	deref_plus, .-deref_plus

	.globl	ra_twice_removed
	.type	ra_twice_removed, @function
ra_twice_removed:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	# RA saved at *(rsp + 8): DW_CFA_expression rip (DW_OP_breg7 8; DW_OP_deref)
	.cfi_escape 0x10,0x10,0x3,0x77,0x08,0x06
	nop
	.cfi_offset rip, -8
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	ra_twice_removed, .-ra_twice_removed

	.section .note.GNU-stack,"",@progbits
