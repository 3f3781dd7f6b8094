/* Four threads, each stopped a few calls deep. */
#include <pthread.h>

static pthread_barrier_t barrier;

__attribute__((noinline)) void stop_here(int id) { __asm__ volatile("" :: "r"(id) : "memory"); }

__attribute__((noinline)) int inner(int id, int depth)
{
    volatile int local = id;
    if (depth > 0)
        return inner(id, depth - 1) + local;
    pthread_barrier_wait(&barrier);
    stop_here(id);
    pthread_barrier_wait(&barrier);
    return local;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    return (void *)(long)inner((int)id, (int)id + 2);
}

int main(void)
{
    pthread_t threads[4];
    pthread_barrier_init(&barrier, NULL, 4);
    for (long i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
