/* Preloaded into the test's debuginfod (0.188 has no option for the
   address it listens on): its listening socket is bound to 127.0.0.1
   only.  An IPv6 bind fails, so that it falls back to IPv4; an IPv4 bind
   to any address is made to the loopback address. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int bind(int fd, const struct sockaddr *address, socklen_t length)
{
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    struct sockaddr_in loopback;

    if (real_bind == NULL)
        real_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    if (address->sa_family == AF_INET6) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (address->sa_family == AF_INET && length >= sizeof loopback) {
        memcpy(&loopback, address, sizeof loopback);
        loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return real_bind(fd, (const struct sockaddr *)&loopback, sizeof loopback);
    }
    return real_bind(fd, address, length);
}
