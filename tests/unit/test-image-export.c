/*
 * test-image-export.c - image_export() (image/commit.h): a committed
 * image written as an OCI layout tar holds oci-layout, index.json and its
 * blobs, and imported into another store it is the same image, by digest
 * and by name; an unknown image is -ENOENT. Runs as root (imports chown
 * their trees); skipped otherwise.
 */
#include "image-commit-fixture.h"

/* The names of the tar at path, one per line, into out. */
static void tar_names(const char *path, char *out, size_t size)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	out[0] = '\0';
	while (archive_read_next_header(a, &e) == ARCHIVE_OK)
		n += (size_t)snprintf(out + n, size - n, "%s\n", archive_entry_pathname(e));
	archive_read_free(a);
}

static void test_export_imports_back(void **state)
{
	struct fx *f = *state;
	make_upper(f);
	int fd = open_upper(f);
	struct image_info ni;
	assert_int_equal(
	    image_commit(f->s, "base:1", fd, SBX, "t/made:2", NULL, &ni, NULL, &f->err), 0);
	close(fd);
	char path[128], names[4096];
	snprintf(path, sizeof(path), "%s/export.tar", f->state);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	struct image_info ei;
	assert_int_equal(image_export(f->s, "t/made:2", out, &ei, &f->err), 0);
	close(out);
	assert_string_equal(ei.digest, ni.digest);
	tar_names(path, names, sizeof(names));
	assert_non_null(strstr(names, "oci-layout\n"));
	assert_non_null(strstr(names, "index.json\n"));
	char blob[128];
	snprintf(blob, sizeof(blob), "blobs/sha256/%s\n", ni.digest + 7);
	assert_non_null(strstr(names, blob));
	snprintf(blob, sizeof(blob), "blobs/sha256/%s\n", ni.config_digest + 7);
	assert_non_null(strstr(names, blob));

	/* into another store: the same image, by its name */
	char state2[64];
	snprintf(state2, sizeof(state2), "%s/other", f->state);
	assert_int_equal(mkdir(state2, 0700), 0);
	struct image_store *s2 = NULL;
	struct image_info back;
	assert_int_equal(image_store_open(state2, &s2, &f->err), 0);
	int r = image_import(s2, path, NULL, &back, &f->err);
	if (r < 0)
		fail_msg("import of the export: %s", f->err.msg);
	assert_string_equal(back.digest, ni.digest);
	assert_string_equal(back.config_digest, ni.config_digest);
	assert_string_equal(back.name, "t/made:2");
	image_store_free(s2);

	/* an image that is not there */
	snprintf(path, sizeof(path), "%s/none.tar", f->state);
	out = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_int_equal(image_export(f->s, "nope:1", out, NULL, &f->err), -ENOENT);
	close(out);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: imports chown their trees; skipped\n");
		return 77; /* meson: skipped */
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_export_imports_back, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
