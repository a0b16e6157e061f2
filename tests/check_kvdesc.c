/* tests/check_kvdesc.c — the KV page descriptor rules. */
#include <errno.h>
#include <string.h>

#include "sc_check.h"

static struct sc_kv_desc plain(uint64_t len)
{
	struct sc_kv_desc d;
	memset(&d, 0, sizeof(d));
	d.version = 1;
	d.layer_end = 32;
	d.layer_count = 32;
	d.token_count = 100;
	d.k_row_bytes = 128;
	d.v_row_bytes = 128;
	d.v_element_bytes = 2;
	d.payload_bytes = len;
	return d;
}

static struct sc_kv_desc iswa(uint64_t base, uint64_t swa)
{
	struct sc_kv_desc d = plain(base + swa);
	d.version = 2;
	d.codec = SC_KV_CODEC_ISWA;
	d.component_count = 2;
	d.token_start = 0;
	d.token_count = 1000;
	d.components[0] = (struct sc_kv_component){ .version = 1, .role = SC_KV_ROLE_BASE, .token_start = 0,
						    .token_count = 1000, .payload_offset = 0, .payload_bytes = base };
	d.components[1] = (struct sc_kv_component){ .version = 1, .role = SC_KV_ROLE_SWA, .token_start = 488,
						    .token_count = 512, .payload_offset = base, .payload_bytes = swa };
	return d;
}

START_TEST(plain_codecs)
{
	struct sc_kv_desc d = plain(4096);
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4096), 0);
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4095), -EINVAL); /* payload_bytes == len */
	d.codec = SC_KV_CODEC_1;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4096), 0);
	d.codec = 3;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4096), -EINVAL);
	d.codec = 0;
	d.component_count = 1; /* codec 0/1 only with no components */
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4096), -EINVAL);
	ck_assert_int_eq(sc_kv_desc_validate(NULL, 0), -EINVAL);
}
END_TEST

START_TEST(k_index_flag_iff_row_bytes)
{
	struct sc_kv_desc d = plain(64);
	d.flags = SC_KV_DESC_HAS_K_INDEX;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 64), -EINVAL);
	d.k_idx_row_bytes = 8;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 64), 0);
	d.flags = 0;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 64), -EINVAL);
	d.k_idx_row_bytes = 0;
	d.flags = SC_KV_DESC_V_TRANSPOSED;
	ck_assert_int_eq(sc_kv_desc_validate(&d, 64), 0);
	d.flags = 0x4; /* unknown bit */
	ck_assert_int_eq(sc_kv_desc_validate(&d, 64), -EINVAL);
}
END_TEST

START_TEST(iswa_composite)
{
	struct sc_kv_desc d = iswa(3000, 1000);
	ck_assert_int_eq(sc_kv_desc_validate(&d, 4000), 0);
	struct sc_kv_desc x;
	x = d; x.version = 1;
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.component_count = 1;
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[0].role = SC_KV_ROLE_SWA;
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[0].payload_offset = 1;
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[0].token_count = 999; /* base must cover the same range */
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[1].token_start = 487; /* SWA must end at the same token */
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[1].payload_offset = 2999; /* must start at base bytes */
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[1].payload_bytes = 999; /* offset + size == len */
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
	x = d; x.components[1].token_start = UINT64_MAX; /* overflow */
	ck_assert_int_eq(sc_kv_desc_validate(&x, 4000), -EINVAL);
}
END_TEST

START_TEST(restore_rules)
{
	struct sc_kv_desc d = plain(64);
	ck_assert_int_eq(sc_kv_desc_validate_restore(&d, 64, 100), 0);
	ck_assert_int_eq(sc_kv_desc_validate_restore(&d, 64, 99), -EINVAL);
	d.token_start = 1;
	ck_assert_int_eq(sc_kv_desc_validate_restore(&d, 64, 100), -EINVAL);
}
END_TEST

Suite *kvdesc_suite(void)
{
	Suite *s = suite_create("kvdesc");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, plain_codecs);
	tcase_add_test(tc, k_index_flag_iff_row_bytes);
	tcase_add_test(tc, iswa_composite);
	tcase_add_test(tc, restore_rules);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(kvdesc_suite)
