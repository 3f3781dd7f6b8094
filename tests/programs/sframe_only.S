/* sframe_only_frame: its CFI goes to .sframe alone (no .eh_frame), and it
   moves the stack pointer by a register (add %rax, %rsp), which LLDB's
   instruction inspection cannot follow: LLDB's own unwinder loses the
   frames above it, SFrame data has them (the frame provider's own frames). */
	.cfi_sections .sframe
	.text
	.globl	sframe_only_frame
	.type	sframe_only_frame, @function
sframe_only_frame:
	.cfi_startproc
	movq	$-64, %rax
	addq	%rax, %rsp
	.cfi_adjust_cfa_offset 64
	call	stop_here
	movq	$64, %rax
	addq	%rax, %rsp
	.cfi_adjust_cfa_offset -64
	ret
	.cfi_endproc
	.size	sframe_only_frame, .-sframe_only_frame
	.section	.note.GNU-stack,"",@progbits
