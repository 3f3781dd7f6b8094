"""Loaded into lldb by the tests: `test-lldb-pcs` prints the PCs of LLDB's
own frames on one line, one per stack frame: LLDB lists a function inlined
into another as a frame of its own with the same CFA, and gives the outer
function the address of the inlined call; the innermost of them has the
real PC."""



def lldb_pcs(debugger, command, exe_ctx, result, internal_dict):
    thread = exe_ctx.GetThread()
    pcs, previous = [], None
    for frame in thread.frames:
        if (previous is not None and previous.IsInlined()
                and frame.GetCFA() == previous.GetCFA()):
            continue  # the stack frame the previous, inlined entry is in
        pcs.append(frame.GetPC())
        previous = frame
    result.AppendMessage("LLDB-PCS " + " ".join(f"{pc:#x}" for pc in pcs))


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand(f"command script add -o -f {__name__}.lldb_pcs test-lldb-pcs")
