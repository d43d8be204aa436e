/* output.c - a command's output as JSON text or base64 (output.h). */
#include "api/output.h"

#include "api/json-util.h"
#include "base/base64.h"

#include <string.h>

size_t output_cut(const char *buf, size_t len)
{
	/* walk back over continuation bytes to the lead byte of the last sequence */
	size_t back = 0;
	while (back < 3 && back < len && ((unsigned char)buf[len - 1 - back] & 0xc0) == 0x80)
		back++;
	if (back == len)
		return len;
	unsigned char lead = (unsigned char)buf[len - 1 - back];
	size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
	/* a lead byte whose sequence is not complete yet: keep it for later */
	return need > back + 1 && lead >= 0xc0 ? len - back - 1 : len;
}

bool output_is_text(const char *buf, size_t len)
{
	return !memchr(buf, '\0', len) && utf8_is_valid(buf, len);
}

void output_put_json(struct buf *b, const char *buf, size_t len, bool *ret_base64)
{
	*ret_base64 = !output_is_text(buf, len);
	if (!*ret_base64) {
		json_put_str(b, buf, len);
		return;
	}
	buf_puts(b, "\"");
	base64_encode(b, buf, len);
	buf_puts(b, "\"");
}
