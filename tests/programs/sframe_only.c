/* Calls through sframe_only.S's frame, which only SFrame data unwinds:
   each call is the last instruction of its line, so a return address's
   own line is the next one. */
volatile int sink;
void sframe_only_frame(void);

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) void caller(int n)
{
    sink = n;
    sframe_only_frame();  /* caller's call */
    sink = n + 1;
}

int main(void)
{
    caller(3);  /* main's call */
    sink = 0;
    return 0;
}
