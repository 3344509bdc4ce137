/*
 * sock.c: see accel/sock.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#include "accel/clock.h"
#include "accel/sock.h"

enum accel_err accel_send_all(int fd, const void *buf, size_t len, double deadline)
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
            return ACCEL_EPEER;
        r = poll(&pfd, 1, accel_ms_left(deadline));
        if (r == 0 && accel_ms_left(deadline) == 0) {
            errno = ETIMEDOUT;
            return ACCEL_ETIMEDOUT;
        }
        if (r < 0 && errno != EINTR)
            return ACCEL_EPEER;
    }
    return ACCEL_OK;
}
