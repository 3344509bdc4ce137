/*
 * clock.c: see accel/clock.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "accel/clock.h"

double accel_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int accel_ms_left(double deadline)
{
    double left = deadline - accel_now();

    if (left <= 0)
        return 0;
    if (left > 3600)
        return 3600 * 1000;
    return (int)(left * 1000) + 1;
}

int accel_send_all(int fd, const void *buf, size_t len, double deadline)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        struct pollfd pfd = {fd, POLLOUT, 0};
        int r;

        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        r = poll(&pfd, 1, accel_ms_left(deadline));
        if (r == 0 && accel_ms_left(deadline) == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}
