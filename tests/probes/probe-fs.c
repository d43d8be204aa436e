/*
 * probe-fs.c - file system probes: secrets, mounts, read-only root, /proc
 * masking, fds and cwd, /dev, hard links, Landlock, and disk filling.
 */
#include "probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_TMP_NAME "agentbox-probe-tmp"

/* errno of lstat(path), 0 if it exists. */
static int lstat_err(const char *path)
{
	struct stat st;
	return ERR(lstat(path, &st));
}

/* Open for reading like a curious program would; errno or 0. */
static int open_read_err(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* ------------------------------------------------------------------ */
/* F1: host secrets are absent */

static void secret_absent(const char *path, const char *accept)
{
	int e = lstat_err(path);
	if (e == 0) {
		/* It exists: say whether it can also be read. */
		int o = open_read_err(path);
		check(false, "%s=exists(open:%s)", path, errname(o));
		return;
	}
	expect_err(path, e, accept);
}

void probe_F1(void)
{
	static const char *const paths[] = {
	    "/var/run/secrets/kubernetes.io/serviceaccount/token",
	    "/run/secrets/kubernetes.io/serviceaccount/token",
	    "/root/.ssh",
	    "/etc/shadow",
	    "/etc/gshadow",
	    "/etc/ssh/ssh_host_ed25519_key",
	    "/etc/ssh/ssh_host_rsa_key",
	    "/var/lib/agentbox",
	    "/run/agentbox",
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		secret_absent(paths[i], "ENOENT");
	/* Through init's root: EACCES (init not dumpable) or the sandbox's own root. */
	secret_absent("/proc/1/root/etc/shadow", "ENOENT|EACCES");
	for (size_t i = 0; i < opt.nsecret_paths; i++)
		secret_absent(opt.secret_paths[i], "ENOENT");
}

/* ------------------------------------------------------------------ */
/* F3: mounts and socket files */

/* Undo the octal escapes of mountinfo (\040 for space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* path == dir or path is inside dir. */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static bool has_opt(const char *opts, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = opts; p && *p;) {
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

static char probe_dir[PATH_MAX];

/* Host /etc entries the runtime binds read-only on purpose (the loader cache, Debian's
 * alternatives, the trusted CAs' public certificates). */
static const char *const etc_from_host[] = {"/etc/ld.so.cache",	 "/etc/ld.so.conf",
					    "/etc/ld.so.conf.d", "/etc/alternatives",
					    "/etc/localtime",	 "/etc/ssl/certs"};

static bool allowed_volume(const char *mp)
{
	for (size_t i = 0; i < opt.nallow_mounts; i++)
		if (under(mp, opt.allow_mounts[i]))
			return true;
	return false;
}

/* May a mount backed by host storage sit at mountpoint mp (root field root)? */
static bool host_backed_ok(const char *mp, const char *root)
{
	static const char *const sys_dirs[] = {"/usr",	 "/bin",   "/sbin",  "/lib",
					       "/lib32", "/lib64", "/libx32"};
	if (strcmp(mp, "/") == 0)
		return strcmp(root, "/") != 0; /* a rootfs directory, never a whole host fs */
	for (size_t i = 0; i < sizeof(sys_dirs) / sizeof(sys_dirs[0]); i++)
		if (under(mp, sys_dirs[i]))
			return true;
	if (in_list(mp, etc_from_host, sizeof(etc_from_host) / sizeof(etc_from_host[0])))
		return true;
	if (probe_dir[0] && under(mp, probe_dir))
		return true;
	return allowed_volume(mp);
}

/*
 * A host devtmpfs may appear only as single device nodes: /dev/<name> bound
 * from "/<name>" for the minimal set, or /dev/null bound over masked /proc
 * files.
 */
static bool devnode_ok(const char *mp, const char *root)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	if (under(mp, "/proc") && strcmp(mp, "/proc") != 0)
		return strcmp(root, "/null") == 0;
	if (strncmp(mp, "/dev/", 5) != 0 || root[0] != '/' || strcmp(mp + 5, root + 1) != 0)
		return false;
	return in_list(root + 1, nodes, sizeof(nodes) / sizeof(nodes[0]));
}

static size_t nsockets, nwalked;

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_D && (strcmp(path, "/proc") == 0 || strcmp(path, "/sys") == 0))
		return FTW_SKIP_SUBTREE;
	if (++nwalked > 2000000) {
		check(false, "walk-truncated");
		return FTW_STOP;
	}
	if (S_ISSOCK(st->st_mode)) {
		nsockets++;
		check(false, "socket:%s", path);
	}
	return FTW_CONTINUE;
}

void probe_F3(void)
{
	static const char *const bad_types[] = {
	    "sysfs", "cgroup",	 "cgroup2",    "securityfs", "debugfs",	  "tracefs",
	    "bpf",   "configfs", "fusectl",    "pstore",     "efivarfs",  "binfmt_misc",
	    "nsfs",  "autofs",	 "rpc_pipefs", "nfsd",	     "hugetlbfs", "selinuxfs",
	};
	static const char *const pseudo_types[] = {"tmpfs", "proc", "devpts", "mqueue", "ramfs"};

	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash && slash != exe) {
			*slash = '\0';
			snprintf(probe_dir, sizeof(probe_dir), "%s", exe);
		}
	}

	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		check(false, "mountinfo=%s", errname(errno));
		return;
	}
	char line[8192];
	int nmounts = 0;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
		char *save = NULL, *tok[64];
		int k = 0, dash = -1;
		for (char *t = strtok_r(line, " \n", &save); t && k < 64;
		     t = strtok_r(NULL, " \n", &save)) {
			if (dash < 0 && k >= 6 && strcmp(t, "-") == 0)
				dash = k;
			tok[k++] = t;
		}
		if (dash < 0 || dash + 1 >= k)
			continue;
		char *fstype = tok[dash + 1];
		nmounts++;
		char *root = tok[3], *mp = tok[4], *mopts = tok[5];
		unescape(root);
		unescape(mp);

		if (in_list(fstype, bad_types, sizeof(bad_types) / sizeof(bad_types[0]))) {
			check(false, "forbidden-fs:%s@%s", fstype, mp);
			continue;
		}
		bool pseudo =
		    in_list(fstype, pseudo_types, sizeof(pseudo_types) / sizeof(pseudo_types[0]));
		bool devtmpfs = strcmp(fstype, "devtmpfs") == 0;
		if (devtmpfs) {
			if (!devnode_ok(mp, root))
				check(false, "host-devtmpfs:%s@%s", root, mp);
		} else if (strcmp(fstype, "proc") == 0 && !under(mp, "/proc")) {
			check(false, "proc@%s", mp);
		} else if (!pseudo) {
			/* ext4, overlay, 9p, virtiofs, fuse...: host content */
			if (!host_backed_ok(mp, root))
				check(false, "host-mount:%s:%s@%s", fstype, root, mp);
			else if (!has_opt(mopts, "ro") && !allowed_volume(mp))
				check(false, "host-mount-rw:%s@%s", root, mp);
		}
		if (!has_opt(mopts, "nosuid"))
			check(false, "suid-allowed@%s", mp);
		/* Device binds (and /dev/null over /proc files) need dev; all else nodev. */
		if (!has_opt(mopts, "nodev") && !under(mp, "/dev") && !devtmpfs)
			check(false, "dev-allowed@%s", mp);
	}
	fclose(f);
	obs("mounts=%d", nmounts);

	nsockets = nwalked = 0;
	if (nftw("/", walk_cb, 16, FTW_PHYS | FTW_ACTIONRETVAL) < 0)
		obs("walk=%s", errname(errno));
	obs("walked=%zu", nwalked);
	check(nsockets == 0, "sockets=%zu", nsockets);
}

/* ------------------------------------------------------------------ */
/* F4: read-only /usr and /etc; no (re)mounts */

/* Try to create path; remove it again if that worked. */
static int create_err(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return errno;
	close(fd);
	unlink(path);
	return 0;
}

static int open_write_err(const char *path)
{
	/* Never O_TRUNC and never write: opening is the test. */
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int mkdir_err(const char *path)
{
	if (mkdir(path, 0700) < 0)
		return errno;
	rmdir(path);
	return 0;
}

void probe_F4(void)
{
	expect_err("create:/usr", create_err("/usr/" PROBE_TMP_NAME), "EROFS");
	expect_err("create:/usr/bin", create_err("/usr/bin/" PROBE_TMP_NAME), "EROFS");
	expect_err("create:/etc", create_err("/etc/" PROBE_TMP_NAME), "EROFS");
	expect_err("create:/", create_err("/" PROBE_TMP_NAME), "EROFS");
	expect_err("mkdir:/usr", mkdir_err("/usr/" PROBE_TMP_NAME), "EROFS");
	/* Existing files we do not own: permission is checked before the mount's ro flag. */
	expect_err("openw:/etc/passwd", open_write_err("/etc/passwd"), "EROFS|EACCES|ENOENT");
	expect_err("openw:/usr/bin/env", open_write_err("/usr/bin/env"), "EROFS|EACCES");

	/* Mounts: in a private mount namespace when we can make one (host runs). */
	bool scratch = scratch_mountns();
	bool real = scratch || !privileged_host();
	if (!real)
		obs("unsafe-host:targets-replaced");
	const char *tmp = real ? "/tmp" : "/nonexistent-agentbox-probe";
	const char *root = real ? "/" : "/nonexistent-agentbox-probe";
	const char *usr = real ? "/usr" : "/nonexistent-agentbox-probe";
	expect_err("mount-tmpfs:/tmp", ERR(mount("tmpfs", tmp, "tmpfs", MS_NOSUID, "size=1m")),
		   "EPERM");
	expect_err("remount-rw:/", ERR(mount(NULL, root, NULL, MS_REMOUNT | MS_BIND, NULL)),
		   "EPERM");
	expect_err("remount-rw:/usr", ERR(mount(NULL, usr, NULL, MS_REMOUNT | MS_BIND, NULL)),
		   "EPERM");
	expect_err("bind:/usr", ERR(mount("/usr", tmp, NULL, MS_BIND, NULL)), "EPERM");
}

/* ------------------------------------------------------------------ */
/* F5: kernel knobs cannot be written */

void probe_F5(void)
{
	static const char *const knobs[] = {
	    "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger",
	    "/proc/sys/vm/drop_caches",	     "/proc/sys/kernel/modprobe",
	    "/proc/sys/kernel/panic",	     "/proc/sys/fs/binfmt_misc/register",
	};
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
		expect_err(knobs[i], open_write_err(knobs[i]), "EACCES|EROFS|EPERM|ENOENT");
}

/* ------------------------------------------------------------------ */
/* F6: masked /proc files, no /sys */

static void masked_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		obs("%s=%s", path, errname(errno));
		return;
	}
	char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n < 0)
		obs("%s=read:%s", path, errname(e));
	else
		check(n == 0, "%s=%s", path, n == 0 ? "empty" : "readable");
}

static void masked_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		obs("%s=%s", path, errname(errno));
		return;
	}
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	check(n == 0, "%s=%s", path, n == 0 ? "empty" : "listed");
}

void probe_F6(void)
{
	static const char *const files[] = {
	    "/proc/kcore",	   "/proc/keys",	"/proc/timer_list", "/proc/sched_debug",
	    "/proc/latency_stats", "/proc/timer_stats", "/proc/kmsg",	    "/proc/key-users",
	};
	static const char *const dirs[] = {"/proc/acpi", "/proc/scsi", "/proc/fs/nfsd"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		masked_file(files[i]);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		masked_dir(dirs[i]);
	expect_absent("/sys", lstat_err("/sys"));
}

/* ------------------------------------------------------------------ */
/* F7: fds and cwd */

void probe_F7(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		check(false, "fd-dir=%s", errname(errno));
	} else {
		int self = dirfd(d);
		bool have[3] = {false, false, false};
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			long fd = strtol(de->d_name, NULL, 10);
			if (fd == self)
				continue;
			if (fd >= 0 && fd <= 2) {
				have[fd] = true;
				continue;
			}
			char link[64], target[256];
			snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
			ssize_t n = readlink(link, target, sizeof(target) - 1);
			target[n > 0 ? n : 0] = '\0';
			check(false, "extra-fd:%ld->%s", fd, target);
		}
		closedir(d);
		obs("fds=%s%s%s", have[0] ? "0" : "", have[1] ? "1" : "", have[2] ? "2" : "");
	}

	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd))) {
		check(false, "getcwd=%s", errname(errno));
	} else {
		check(cwd[0] == '/', "cwd=%s", cwd);
	}
	/* Walk ".." from cwd: we must reach our own root. */
	struct stat root, st, prev = {0};
	if (stat("/", &root) < 0) {
		check(false, "stat-root=%s", errname(errno));
		return;
	}
	int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool reached = false;
	for (int i = 0; fd >= 0 && i < 256; i++) {
		if (fstat(fd, &st) < 0)
			break;
		if (st.st_dev == root.st_dev && st.st_ino == root.st_ino) {
			reached = true;
			break;
		}
		if (i > 0 && st.st_dev == prev.st_dev && st.st_ino == prev.st_ino)
			break; /* a ".." that leads to itself that is not our root */
		prev = st;
		int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = up;
	}
	if (fd >= 0)
		close(fd);
	check(reached, "cwd-in-root=%s", reached ? "yes" : "no");
}

/* ------------------------------------------------------------------ */
/* F9: /dev */

void probe_F9(void)
{
	static const struct {
		const char *name;
		unsigned major, minor;
	} nodes[] = {
	    {"null", 1, 3},   {"zero", 1, 5},	 {"full", 1, 7},
	    {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
	};
	static const char *const dirs_ok[] = {"pts", "shm", "mqueue"};
	static const char *const links_ok[] = {"ptmx", "fd", "stdin", "stdout", "stderr", "core"};

	DIR *d = opendir("/dev");
	if (!d) {
		check(false, "/dev=%s", errname(errno));
	} else {
		struct dirent *de;
		int n = 0;
		while ((de = readdir(d))) {
			const char *nm = de->d_name;
			if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
				continue;
			n++;
			struct stat st;
			if (lstat(join("/dev", nm), &st) < 0) {
				check(false, "/dev/%s=%s", nm, errname(errno));
				continue;
			}
			bool known = false;
			for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
				if (strcmp(nm, nodes[i].name) != 0)
					continue;
				known = true;
				check(S_ISCHR(st.st_mode) && major(st.st_rdev) == nodes[i].major &&
					  minor(st.st_rdev) == nodes[i].minor,
				      "/dev/%s=%u:%u", nm, major(st.st_rdev), minor(st.st_rdev));
			}
			if (in_list(nm, dirs_ok, sizeof(dirs_ok) / sizeof(dirs_ok[0])))
				known = S_ISDIR(st.st_mode);
			if (in_list(nm, links_ok, sizeof(links_ok) / sizeof(links_ok[0])))
				known = S_ISLNK(st.st_mode) ||
					(strcmp(nm, "ptmx") == 0 && S_ISCHR(st.st_mode) &&
					 major(st.st_rdev) == 5 && minor(st.st_rdev) == 2);
			if (!known)
				check(false, "extra:/dev/%s", nm);
		}
		closedir(d);
		obs("entries=%d", n);
	}
	static const char *const absent[] = {
	    "/dev/mem", "/dev/kmem",  "/dev/port", "/dev/kmsg",	   "/dev/kvm",	  "/dev/sda",
	    "/dev/vda", "/dev/nvme0", "/dev/fuse", "/dev/net/tun", "/dev/console"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		expect_absent(absent[i], lstat_err(absent[i]));

	const char *node = "/tmp/" PROBE_TMP_NAME "-node";
	int e = ERR(mknod(node, S_IFCHR | 0600, makedev(1, 3)));
	if (e == 0)
		unlink(node);
	expect_err("mknod-chr", e, "EPERM");
	node = "/dev/" PROBE_TMP_NAME;
	e = ERR(mknod(node, S_IFCHR | 0600, makedev(1, 3)));
	if (e == 0)
		unlink(node);
	expect_err("mknod-chr:/dev", e, "EPERM|EACCES|EROFS");
}

/* ------------------------------------------------------------------ */
/* F10: hard links to files we do not own */

static int link_err(const char *from, const char *to)
{
	if (link(from, to) < 0)
		return errno;
	unlink(to);
	return 0;
}

void probe_F10(void)
{
	const char *dsts[] = {"/tmp/" PROBE_TMP_NAME "-link", "/dev/shm/" PROBE_TMP_NAME "-link"};
	const char *srcs[] = {"/etc/passwd", "/usr/bin/passwd", "/usr/bin/su"};
	uid_t me = geteuid();
	for (size_t s = 0; s < sizeof(srcs) / sizeof(srcs[0]); s++) {
		struct stat st;
		if (lstat(srcs[s], &st) < 0) {
			obs("%s=absent", srcs[s]);
			continue;
		}
		for (size_t d = 0; d < sizeof(dsts) / sizeof(dsts[0]); d++) {
			char what[256];
			snprintf(what, sizeof(what), "%s->%s", srcs[s], dsts[d]);
			int e = link_err(srcs[s], dsts[d]);
			if (st.st_uid == me && e == 0)
				obs("%s=allowed(own-file)", what);
			else
				expect_err(what, e, "EPERM|EXDEV|EROFS|EACCES");
		}
	}
	/* Files on the writable tmpfs owned by someone else (the runtime, say). */
	const char *dirs[] = {"/tmp", "/dev/shm", "."};
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		DIR *dir = opendir(dirs[d]);
		if (!dir)
			continue;
		struct dirent *de;
		while ((de = readdir(dir))) {
			struct stat st;
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/%s", dirs[d], de->d_name);
			if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid == me)
				continue;
			expect_err(path, link_err(path, "/tmp/" PROBE_TMP_NAME "-link2"),
				   "EPERM|EXDEV|EROFS|EACCES");
		}
		closedir(dir);
	}
}

/* ------------------------------------------------------------------ */
/* E5: Landlock */

/* Which layer would refuse a write to path (its directory for creates)? */
static const char *guess_layer(const char *path, bool create)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	if (create) {
		char *slash = strrchr(dir, '/');
		if (slash)
			slash[slash == dir ? 1 : 0] = '\0';
	}
	struct statvfs vfs;
	struct stat st;
	if (statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_RDONLY))
		return "rofs";
	if (stat(dir, &st) < 0)
		return "unknown";
	bool dac = (st.st_uid == geteuid() && (st.st_mode & S_IWUSR)) || (st.st_mode & S_IWOTH) ||
		   (st.st_gid == getegid() && (st.st_mode & S_IWGRP));
	return dac ? "landlock" : "dac";
}

void probe_E5(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0) {
		int e = errno;
		obs("abi=%s", errname(e));
		if (e == EOPNOTSUPP) {
			skip("landlock-disabled-in-kernel");
			return;
		}
	} else {
		obs("abi=%ld", abi);
	}

	/* Files we own on a writable fs, outside the allowed paths: only Landlock refuses. */
	static const char *const own[] = {"/proc/self/comm", "/proc/self/oom_score_adj",
					  "/proc/self/attr/current", "/proc/self/mem"};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		int e = open_write_err(own[i]);
		if (e == EACCES)
			obs("%s=EACCES(%s)", own[i], guess_layer(own[i], false));
		else if (e == ENOENT || e == EINVAL)
			obs("%s=%s", own[i], errname(e)); /* no LSM attr file here */
		else
			expect_err(own[i], e, "EACCES");
	}

	/* Another process's memory, the door ptrace(2) and process_vm_writev close. */
	pid_t child = fork();
	if (child == 0) {
		alarm(10);
		for (;;)
			pause();
	}
	if (child > 0) {
		char mem[64];
		snprintf(mem, sizeof(mem), "/proc/%d/mem", child);
		int fd = open(mem, O_RDWR | O_CLOEXEC);
		int me = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		check(me != 0, "openw:/proc/child/mem=%s", errname(me));
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}

	const char *devfile = "/dev/" PROBE_TMP_NAME "-e5";
	int e = create_err(devfile);
	if (e)
		obs("create:/dev=%s(%s)", errname(e), guess_layer(devfile, true));
	else
		check(false, "create:/dev=allowed");

	/* The allowed paths still work, so the denials above are not blanket. */
	expect_err("create:/tmp", create_err("/tmp/" PROBE_TMP_NAME "-e5"), "allowed");
	expect_err("openw:/dev/null", open_write_err("/dev/null"), "allowed");
}

/* ------------------------------------------------------------------ */
/* R3/R4: filling the disk */

void fill_dir(const char *dir, uint64_t max, bool cap_by_fs_size)
{
	struct statvfs vfs;
	if (statvfs(dir, &vfs) < 0) {
		check(false, "%s=%s", dir, errname(errno));
		return;
	}
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (cap_by_fs_size && avail > max) {
		skip("%s-avail=%lluMiB>fill-max=%lluMiB", dir, (unsigned long long)(avail >> 20),
		     (unsigned long long)(max >> 20));
		return;
	}
	signal(SIGXFSZ, SIG_IGN); /* an fsize rlimit gives EFBIG: go on with a new file */

	static char chunk[1 << 20];
	memset(chunk, 'x', sizeof(chunk));
	uint64_t total = 0;
	int last = 0, nfiles = 0;
	char path[PATH_MAX];
	while (total < max && nfiles < 4096) {
		snprintf(path, sizeof(path), "%s/" PROBE_TMP_NAME "-fill.%d", dir, nfiles);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			last = errno;
			break;
		}
		nfiles++;
		last = 0;
		while (total < max) {
			size_t want = sizeof(chunk);
			if (max - total < want)
				want = (size_t)(max - total);
			ssize_t n = write(fd, chunk, want);
			if (n < 0) {
				last = errno;
				break;
			}
			total += (uint64_t)n;
		}
		close(fd);
		if (last != EFBIG)
			break;
	}
	for (int i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/" PROBE_TMP_NAME "-fill.%d", dir, i);
		unlink(path);
	}
	obs("%s-written=%lluMiB", dir, (unsigned long long)(total >> 20));
	if (total >= max && last == 0)
		check(false, "%s=no-ENOSPC-within-%lluMiB", dir, (unsigned long long)(max >> 20));
	else
		expect_err(dir, last, "ENOSPC");
	/* The space comes back once the files are gone. */
	struct statvfs after;
	if (statvfs(dir, &after) == 0) {
		uint64_t again = (uint64_t)after.f_bavail * after.f_frsize;
		check(again + (1ULL << 20) >= avail, "%s-reclaimed=%s", dir,
		      again + (1ULL << 20) >= avail ? "yes" : "no");
	}
}

void probe_R3(void)
{
	fill_dir("/tmp", opt.fill_max, true);
}

void probe_R4(void)
{
	fill_dir("/dev/shm", opt.fill_max, true);
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof(cwd)) && strcmp(cwd, "/tmp") != 0 && strcmp(cwd, "/dev/shm") != 0)
		fill_dir(cwd, opt.fill_max, true);
}

static const char *fill_path;

static void fill_run(void)
{
	fill_dir(fill_path, UINT64_MAX, false);
}

int mode_fill(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "agentbox-probe: fill: %s is not a directory\n", path);
		return 2;
	}
	fill_path = path;
	static const struct probe p = {"fill",	 "ENOSPC", "write until the file system is full",
				       fill_run, 0,	   600};
	return run_adhoc(&p);
}
