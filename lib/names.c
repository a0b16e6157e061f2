/*
 * lib/names.c — the name of each value of every public enum, as the tools print them (and as
 * bindings and JSON use them). Each returns a static string, "unknown" for any other value:
 * never NULL, so a caller can print the result of a corrupted or future value as is.
 */
#include "stagecache.h"

#define NAME(v, s) case v: return s;

const char *sc_huge_name(int v)
{
	switch (v) {
	NAME(SC_HUGE_AUTO, "auto") NAME(SC_HUGE_REQUIRE, "require") NAME(SC_HUGE_OFF, "off")
	default: return "unknown";
	}
}

const char *sc_payload_kind_name(int v)
{
	switch (v) {
	NAME(SC_PAYLOAD_FULL_STATE, "full_state") NAME(SC_PAYLOAD_RECURRENT_ONLY, "recurrent_only")
	NAME(SC_PAYLOAD_KV_RECURRENT, "kv_recurrent")
	default: return "unknown";
	}
}

const char *sc_origin_name(int v)
{
	switch (v) {
	NAME(SC_ORIGIN_DIRECT, "direct") NAME(SC_ORIGIN_FROM_L3, "l3")
	default: return "unknown";
	}
}

const char *sc_l3_odirect_name(int v)
{
	switch (v) {
	NAME(SC_L3_ODIRECT_AUTO, "auto") NAME(SC_L3_ODIRECT_ON, "on") NAME(SC_L3_ODIRECT_OFF, "off")
	default: return "unknown";
	}
}

const char *sc_promote_why_name(int v)
{
	switch (v) {
	NAME(SC_PROMOTE_WHY_TERMINAL, "terminal") NAME(SC_PROMOTE_WHY_OVERSIZE, "oversize")
	NAME(SC_PROMOTE_WHY_LONG_PREFIX, "long_prefix") NAME(SC_PROMOTE_WHY_SECOND_HIT, "second_hit")
	NAME(SC_PROMOTE_WHY_FIRST_HIT, "first_hit") NAME(SC_PROMOTE_WHY_RETURNING, "returning")
	default: return "unknown";
	}
}

const char *sc_restore_source_name(int v)
{
	switch (v) {
	NAME(SC_RESTORE_FROM_L2, "l2") NAME(SC_RESTORE_FROM_L3, "l3")
	default: return "unknown";
	}
}

const char *sc_ring_state_name(int v)
{
	switch (v) {
	NAME(SC_RING_FREE, "free") NAME(SC_RING_CLAIMING, "claiming") NAME(SC_RING_LIVE, "live")
	NAME(SC_RING_CLOSED, "closed")
	default: return "unknown";
	}
}

const char *sc_extent_kind_name(int v)
{
	switch (v) {
	NAME(SC_EXTENT_HEAP, "heap")
	default: return "unknown";
	}
}
