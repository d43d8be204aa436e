/*
 * test-image-commit.c - image_commit() (image/commit.h): an overlayfs
 * upper directory the test makes itself (files, a directory, a symlink,
 * a hard link pair, a whiteout, an opaque directory, owned by a
 * sandbox's host ids) committed on top of a small image it imports; the
 * new image's tree, owners and config; a layer past its limits, or a
 * file not the sandbox's, refused with nothing left; many hard links;
 * and the markers a real overlayfs (userxattr, as the runtime mounts it)
 * writes in its upper. Runs as root (trees are chowned, whiteouts are
 * character devices, trusted.* xattrs); skipped otherwise.
 */
#include "image-commit-fixture.h"

/* ---- commits ------------------------------------------------------------------- */

static void test_commit_upper(void **state)
{
	struct fx *f = *state;
	make_upper(f);
	int fd = open_upper(f);
	struct image_info ni;
	struct image_commit_stats st;
	struct image_commit_opts o = {.comment = "installed things", .author = "test"};
	/* the base as a sandbox keeps it: its config's digest */
	int r =
	    image_commit(f->s, f->base.config_digest, fd, SBX, "committed", &o, &ni, &st, &f->err);
	close(fd);
	if (r < 0)
		fail_msg("image_commit: %d %s", r, f->err.msg);
	assert_string_equal(ni.name, "committed:latest");
	assert_string_not_equal(ni.digest, f->base.digest);
	assert_int_equal(st.whiteouts, 2); /* etc/gone, opt's opaque marker */
	assert_int_equal(st.dropped, 1);   /* newdir/null */
	assert_int_equal(count_entries(f, "tmp"), 0);

	struct stat sb, sb2;
	assert_tree_file(f, &ni, "etc/who", "base", &sb); /* the base's, kept */
	assert_tree_file(f, &ni, "keep/x", "x", &sb);
	assert_tree_file(f, &ni, "etc/new", "new", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 1000); /* inside 1000, as the image's */
	assert_int_equal(sb.st_gid, IMAGE_ID_BASE + 1000);
	assert_int_equal(sb.st_mode & 07777, 0640);
	assert_false(tree_has(f, &ni, "etc/gone")); /* the whiteout removed it */
	assert_false(tree_has(f, &ni, "opt/a"));    /* the opaque dir hid the base's */
	assert_false(tree_has(f, &ni, "opt/b"));
	assert_tree_file(f, &ni, "opt/c", "c", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE);
	assert_tree_file(f, &ni, "etc/h1", "hard", &sb);
	assert_tree_file(f, &ni, "etc/h2", "hard", &sb2);
	assert_int_equal(sb.st_ino, sb2.st_ino); /* still one file */
	char p[640], target[64];
	tree_path(f, &ni, "etc/link", p, sizeof(p));
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	assert_int_equal(n, 3);
	target[n] = '\0';
	assert_string_equal(target, "new");
	tree_path(f, &ni, "escape", p, sizeof(p));
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	tree_path(f, &ni, "newdir", p, sizeof(p));
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0750);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 5);
	assert_int_equal(sb.st_gid, IMAGE_ID_BASE + 6);
	assert_false(tree_has(f, &ni, "newdir/null"));

	/* the config: one more diff_id, the layer's uncompressed digest */
	struct image_info ii;
	struct image_manifest m = {0};
	struct image_config c = {0};
	assert_int_equal(image_inspect(f->s, "committed", &ii, &m, &c, &f->err), 0);
	assert_int_equal(c.ndiff_ids, 2);
	assert_int_equal(m.nlayers, 2);
	assert_string_equal(m.layers[1].media_type, "application/vnd.oci.image.layer.v1.tar+gzip");
	char diff[72];
	blob_diff_id(f, m.layers[1].digest, diff);
	assert_string_equal(c.diff_ids[1], diff);
	assert_string_equal(c.diff_ids[0], m.layers[0].digest);
	assert_true(c.created_ms > 0);
	image_manifest_release(&m);
	image_config_release(&c);
	/* the base is untouched */
	assert_true(tree_has(f, &f->base, "etc/gone"));
	assert_true(tree_has(f, &f->base, "opt/a"));
	assert_int_equal(image_count(f), 2);
}

static void test_commit_refusals_leave_nothing(void **state)
{
	struct fx *f = *state;
	struct census before = census(f);
	char p[256];
	up_dir(f, "d", 0755, SBX, SBX);
	/* a bomb: one sparse file past the bytes' limit, stopped at its header */
	up_path(f, "d/big", p, sizeof(p));
	int big = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(big >= 0);
	assert_int_equal(ftruncate(big, (off_t)IMAGE_COMMIT_BYTES_MAX + 1), 0);
	assert_int_equal(fchown(big, SBX, SBX), 0);
	close(big);
	int fd = open_upper(f);
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "bomb", NULL, NULL, NULL, &f->err),
			 -EFBIG);
	assert_non_null(strstr(f->err.msg, "d/big"));
	assert_census(f, before);
	assert_int_equal(unlink(p), 0);

	/* too many entries */
	for (int i = 0; i < 5; i++) {
		char name[32];
		snprintf(name, sizeof(name), "d/f%d", i);
		up_file(f, name, "x", 0644, SBX);
	}
	struct image_commit_opts o = {.entries_max = 4};
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "many", &o, NULL, NULL, &f->err),
			 -EFBIG);
	assert_census(f, before);
	o.entries_max = 6; /* d and its five: fits */
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "many", &o, NULL, NULL, &f->err), 0);
	before.images++, before.blobs += 3, before.trees++; /* manifest, config, layer */
	assert_census(f, before);

	/* a file that is not the sandbox's (the host's root): refused, not guessed */
	up_file(f, "d/root", "r", 0644, 0);
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "root", NULL, NULL, NULL, &f->err),
			 -ERANGE);
	assert_non_null(strstr(f->err.msg, "d/root"));
	assert_census(f, before);
	/* the same upper seen with another sandbox's base: every owner is outside */
	assert_int_equal(
	    image_commit(f->s, "base:1", fd, SBX + 65536, "x", NULL, NULL, NULL, &f->err), -ERANGE);
	/* a base that is not there */
	assert_int_equal(image_commit(f->s, "nope:1", fd, SBX, "x", NULL, NULL, NULL, &f->err),
			 -ENOENT);
	assert_census(f, before);
	close(fd);
}

/* Many hard links: each pair stays one file in the tree. */
static void test_commit_many_hard_links(void **state)
{
	struct fx *f = *state;
	up_dir(f, "l", 0755, SBX, SBX);
	for (int i = 0; i < 200; i++) {
		char a[32], p[256], q[256];
		snprintf(a, sizeof(a), "l/f%03d", i);
		up_file(f, a, a, 0644, SBX);
		up_path(f, a, p, sizeof(p));
		snprintf(q, sizeof(q), "%s/l/g%03d", f->upper, i);
		assert_int_equal(link(p, q), 0);
	}
	int fd = open_upper(f);
	struct image_info ni;
	struct image_commit_stats st;
	int r = image_commit(f->s, "base:1", fd, SBX, "links", NULL, &ni, &st, &f->err);
	close(fd);
	if (r < 0)
		fail_msg("image_commit: %d %s", r, f->err.msg);
	assert_int_equal(st.entries, 401);
	assert_int_equal(st.bytes, 200 * 6); /* each file's data once */
	for (int i = 0; i < 200; i += 37) {
		char a[32], b[32];
		struct stat sa, sb;
		snprintf(a, sizeof(a), "l/f%03d", i);
		snprintf(b, sizeof(b), "l/g%03d", i);
		assert_tree_file(f, &ni, a, a, &sa);
		assert_tree_file(f, &ni, b, a, &sb);
		assert_int_equal(sa.st_ino, sb.st_ino);
		assert_int_equal(sa.st_nlink, 2);
	}
}

/* ---- a real overlay ------------------------------------------------------------ */

static void in_dir(const char *dir, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", dir, name);
}

/*
 * The runtime's overlay (userxattr) over the base's tree, changed through
 * the mount: the kernel's own whiteout and opaque directory in the upper.
 * The lower is not id-mapped here: copied-up directories keep the image's
 * host ids, so the commit's id base is IMAGE_ID_BASE.
 */
static void test_commit_real_overlay(void **state)
{
	struct fx *f = *state;
	char data[128], lower[640], opts[1024], p[256];
	snprintf(data, sizeof(data), "%s/ovl", f->state);
	assert_int_equal(mkdir(data, 0755), 0);
	assert_int_equal(mount("tmpfs", data, "tmpfs", 0, "size=16m"), 0);
	const char *dirs[] = {"upper", "work", "mnt"};
	for (size_t i = 0; i < 3; i++) {
		in_dir(data, dirs[i], p, sizeof(p));
		assert_int_equal(mkdir(p, 0755), 0);
	}
	tree_path(f, &f->base, "", lower, sizeof(lower));
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr",
		 lower, data, data);
	char mnt[160], upper[160];
	in_dir(data, "mnt", mnt, sizeof(mnt));
	in_dir(data, "upper", upper, sizeof(upper));
	if (mount("overlay", mnt, "overlay", 0, opts) < 0) {
		int e = errno;
		umount2(data, MNT_DETACH);
		if (e == ENODEV || e == EINVAL)
			skip(); /* no overlayfs, or no userxattr (before Linux 5.11) */
		fail_msg("mount overlay: %s", strerror(e));
	}
	in_dir(mnt, "etc/gone", p, sizeof(p));
	assert_int_equal(unlink(p), 0); /* a whiteout */
	in_dir(mnt, "opt/a", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	in_dir(mnt, "opt/b", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	in_dir(mnt, "opt", p, sizeof(p));
	assert_int_equal(rmdir(p), 0);
	assert_int_equal(mkdir(p, 0755), 0); /* a new, opaque, directory */
	assert_int_equal(chown(p, IMAGE_ID_BASE, IMAGE_ID_BASE), 0);
	write_at(mnt, "opt/c", "c", 1);
	in_dir(mnt, "opt/c", p, sizeof(p));
	assert_int_equal(chown(p, IMAGE_ID_BASE + 7, IMAGE_ID_BASE + 7), 0);
	write_at(mnt, "etc/who", "changed", 7); /* a copy-up */
	assert_int_equal(umount2(mnt, 0), 0);
	char v[4] = "";
	in_dir(upper, "opt", p, sizeof(p));
	assert_int_equal(getxattr(p, "user.overlay.opaque", v, sizeof(v)), 1);

	int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct image_info ni;
	struct image_commit_stats st;
	int r = image_commit(f->s, "base:1", fd, IMAGE_ID_BASE, "real:1", NULL, &ni, &st, &f->err);
	close(fd);
	umount2(data, MNT_DETACH);
	if (r < 0)
		fail_msg("image_commit: %d %s", r, f->err.msg);
	assert_int_equal(st.whiteouts, 2);
	struct stat sb;
	assert_false(tree_has(f, &ni, "etc/gone"));
	assert_false(tree_has(f, &ni, "opt/a"));
	assert_tree_file(f, &ni, "opt/c", "c", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 7);
	assert_tree_file(f, &ni, "etc/who", "changed", &sb);
	assert_tree_file(f, &ni, "keep/x", "x", &sb);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: a commit's trees are chowned, its whiteouts are devices; "
		       "skipped\n");
		return 77; /* meson: skipped */
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_commit_upper, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_refusals_leave_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_many_hard_links, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_real_overlay, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
