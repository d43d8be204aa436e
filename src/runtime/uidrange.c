#include "runtime/uidrange.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int uidrange_open_lock(const char *run_dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/uidranges.lock", run_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

static struct flock slot_lock(short type, unsigned slot)
{
	return (struct flock){.l_type = type, .l_whence = SEEK_SET, .l_start = slot, .l_len = 1};
}

int uidrange_acquire(const char *run_dir, struct uidrange *ret, struct error *err)
{
	int fd = uidrange_open_lock(run_dir);
	if (fd < 0)
		return error_set_errno(err, -fd, "cannot open the uid range lock in %s", run_dir);
	/* Start at a pid-dependent slot so concurrent launchers rarely collide. */
	unsigned start = ((unsigned)getpid() * 2654435761u) % UIDRANGE_SLOTS;
	for (unsigned i = 0; i < UIDRANGE_SLOTS; i++) {
		unsigned slot = (start + i) % UIDRANGE_SLOTS;
		struct flock fl = slot_lock(F_WRLCK, slot);
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
			*ret = (struct uidrange){
			    .lock_fd = fd,
			    .slot = slot,
			    .base = UIDRANGE_BASE + slot * UIDRANGE_SIZE,
			};
			return 0;
		}
		if (errno != EAGAIN && errno != EACCES) {
			int e = errno;
			close(fd);
			return error_set_errno(err, e, "cannot lock a uid range");
		}
	}
	close(fd);
	return error_set(err, EBUSY, "all %u uid ranges are in use", UIDRANGE_SLOTS);
}

void uidrange_release(struct uidrange *r)
{
	if (r->lock_fd >= 0) {
		close(r->lock_fd);
		r->lock_fd = -1;
	}
}

bool uidrange_slot_is_busy(int lock_fd, unsigned slot)
{
	struct flock fl = slot_lock(F_WRLCK, slot);
	if (fcntl(lock_fd, F_OFD_GETLK, &fl) < 0)
		return true; /* when in doubt, never reclaim */
	return fl.l_type != F_UNLCK;
}
