/*
 * test-api-docs.c - docs/api.md tells the truth about the routes and the
 * errors: every route in its "Routes" list exists in the route table and
 * every route of the table is listed; every row of its "Errors" table is
 * a code of errors.c with that status, and every code has a row.
 *
 * API_DOCS_PATH comes from the build (src/api/meson.build).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#define LINES_MAX 2000

struct doc {
	char *line[LINES_MAX];
	size_t n;
};

static void doc_load(struct doc *d)
{
	FILE *f = fopen(API_DOCS_PATH, "r");
	if (!f)
		fail_msg("cannot open %s", API_DOCS_PATH);
	char buf[4096];
	d->n = 0;
	while (fgets(buf, sizeof(buf), f) && d->n < LINES_MAX) {
		buf[strcspn(buf, "\n")] = '\0';
		d->line[d->n] = strdup(buf);
		assert_non_null(d->line[d->n]);
		d->n++;
	}
	fclose(f);
	assert_true(d->n < LINES_MAX);
}

static void doc_free(struct doc *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->line[i]);
}

/* Lines of the section "## title", up to the next "## ". */
static void section(const struct doc *d, const char *title, size_t *ret_first, size_t *ret_end)
{
	size_t i = 0;
	while (i < d->n &&
	       !(strncmp(d->line[i], "## ", 3) == 0 && strcmp(d->line[i] + 3, title) == 0))
		i++;
	if (i == d->n)
		fail_msg("%s has no section \"## %s\"", API_DOCS_PATH, title);
	size_t end = i + 1;
	while (end < d->n && strncmp(d->line[end], "## ", 3) != 0)
		end++;
	*ret_first = i + 1;
	*ret_end = end;
}

static void test_routes_match_the_table(void **state)
{
	(void)state;
	struct doc d;
	doc_load(&d);
	size_t first, end, nroutes;
	section(&d, "Routes", &first, &end);
	const struct api_route *routes = api_routes(&nroutes);
	bool listed[API_ROUTE_COUNT] = {false};
	size_t documented = 0;
	for (size_t i = first; i < end; i++) {
		char method[16], path[256];
		if (strncmp(d.line[i], "- `", 3) != 0)
			continue;
		if (sscanf(d.line[i], "- `%15s %255[^`]`", method, path) != 2)
			fail_msg("cannot read the route line '%s'", d.line[i]);
		documented++;
		size_t k = 0;
		while (k < nroutes && !(strcmp(routes[k].method, method) == 0 &&
					strcmp(routes[k].pattern, path) == 0))
			k++;
		if (k == nroutes)
			fail_msg("docs/api.md lists %s %s, which the route table lacks", method,
				 path);
		if (listed[k])
			fail_msg("docs/api.md lists %s %s twice", method, path);
		listed[k] = true;
		/* and it has a section of its own */
		char heading[300];
		snprintf(heading, sizeof(heading), "## `%s %s`", method, path);
		bool found = false;
		for (size_t j = 0; j < d.n && !found; j++)
			found = strcmp(d.line[j], heading) == 0;
		if (!found)
			fail_msg("docs/api.md has no section %s", heading);
	}
	for (size_t k = 0; k < nroutes; k++)
		if (!listed[k])
			fail_msg("the route %s %s is not in docs/api.md", routes[k].method,
				 routes[k].pattern);
	assert_int_equal(documented, nroutes);
	doc_free(&d);
}

static void test_errors_match_the_table(void **state)
{
	(void)state;
	struct doc d;
	doc_load(&d);
	size_t first, end;
	section(&d, "Errors", &first, &end);
	bool listed[API_ERR_COUNT] = {false};
	for (size_t i = first; i < end; i++) {
		char code[64];
		int status;
		if (strncmp(d.line[i], "| `", 3) != 0)
			continue;
		if (sscanf(d.line[i], "| `%63[^`]` | %d |", code, &status) != 2)
			fail_msg("cannot read the error row '%s'", d.line[i]);
		int c = 0;
		while (c < API_ERR_COUNT &&
		       strcmp(api_error_name((enum api_error_code)c), code) != 0)
			c++;
		if (c == API_ERR_COUNT)
			fail_msg("docs/api.md has an error %s that errors.c lacks", code);
		if (api_error_status((enum api_error_code)c) != status)
			fail_msg("docs/api.md gives %s status %d, errors.c %d", code, status,
				 api_error_status((enum api_error_code)c));
		assert_false(listed[c]);
		listed[c] = true;
	}
	for (int c = 0; c < API_ERR_COUNT; c++)
		if (!listed[c])
			fail_msg("the error %s is not in docs/api.md",
				 api_error_name((enum api_error_code)c));
	doc_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_routes_match_the_table),
	    cmocka_unit_test(test_errors_match_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
