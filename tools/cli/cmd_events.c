/*
 * tools/cli/cmd_events.c — `stagecache events NAME [--l3 DIR] --endpoint tcp://HOST:PORT [--replay ...]`:
 * publish what the arena holds, and every change of it, as vLLM's KV events (a ZeroMQ PUB socket
 * of msgpack KVEventBatches; docs/ROUTING.md), so that cache-aware routers see the host-RAM (L2)
 * and disk (L3) tiers. One publisher per arena: it is the arena's event listener (sc_events_open).
 *
 * The loop: read events (sc_events_read), look at what each names (sc_l2_entry_tokens,
 * sc_l3_prefix_get) and update the model of held blocks (tools/cli/evpub.c), which queues
 * BlockStored / BlockRemoved for what changed; publish the queue as one batch. A loss (the ring
 * was full, a writer died mid-append) rebuilds the model from the truth and publishes it as a
 * snapshot (AllBlocksCleared, then BlockStored for everything held); a writer's death or a
 * periodic L3 rescan compares the truth with the model and publishes the difference. A
 * subscriber that missed batches asks the replay socket: the batches it missed while they are
 * buffered, else a snapshot of the model as of the last batch.
 *
 * libzmq is loaded when the publisher starts (dlopen), not linked: the stagecache binary depends
 * only on what every command uses.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "evpub.h"
#include "l2cli.h"

#define ZMQ_SONAME "libzmq.so.5"
static struct {
	__typeof__(&zmq_ctx_new) ctx_new;
	__typeof__(&zmq_ctx_term) ctx_term;
	__typeof__(&zmq_socket) socket;
	__typeof__(&zmq_close) close;
	__typeof__(&zmq_bind) bind;
	__typeof__(&zmq_setsockopt) setsockopt;
	__typeof__(&zmq_send) send;
	__typeof__(&zmq_msg_init) msg_init;
	__typeof__(&zmq_msg_recv) msg_recv;
	__typeof__(&zmq_msg_data) msg_data;
	__typeof__(&zmq_msg_size) msg_size;
	__typeof__(&zmq_msg_more) msg_more;
	__typeof__(&zmq_msg_close) msg_close;
	__typeof__(&zmq_poll) poll;
	__typeof__(&zmq_errno) errno_;
	__typeof__(&zmq_strerror) strerror_;
} zq;

static int zmq_load(void)
{
	void *h = dlopen(ZMQ_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
#define SYM(f, n) (zq.f = (__typeof__(zq.f))dlsym(h, n)) != NULL
		if (SYM(ctx_new, "zmq_ctx_new") && SYM(ctx_term, "zmq_ctx_term") && SYM(socket, "zmq_socket") &&
		    SYM(close, "zmq_close") && SYM(bind, "zmq_bind") && SYM(setsockopt, "zmq_setsockopt") &&
		    SYM(send, "zmq_send") && SYM(msg_init, "zmq_msg_init") && SYM(msg_recv, "zmq_msg_recv") &&
		    SYM(msg_data, "zmq_msg_data") && SYM(msg_size, "zmq_msg_size") && SYM(msg_more, "zmq_msg_more") &&
		    SYM(msg_close, "zmq_msg_close") && SYM(poll, "zmq_poll") && SYM(errno_, "zmq_errno") &&
		    SYM(strerror_, "zmq_strerror"))
			return 0;
#undef SYM
	}
	fprintf(stderr, "stagecache events: cannot publish: %s (install Debian's libzmq5)\n", dlerror());
	return EXIT_FAIL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache events NAME --endpoint tcp://HOST:PORT [--replay tcp://HOST:PORT] [--l3 DIR]\n"
		"                         [--block-size N] [--topic T] [--medium-l2 NAME] [--medium-l3 NAME]\n"
		"                         [--lora-id N] [--lora-name NAME] [--dp-rank N] [--buffer-steps N]\n"
		"                         [--heartbeat-ms MS]\n"
		"                         [--l3-rescan-ms MS] [--format array|map] [--dir DIR] [--owner USER] [--json]\n"
		"       stagecache events NAME --status [--dir DIR] [--owner USER] [--json]\n\n"
		"Publish what the arena NAME holds as vLLM's KV events, for cache-aware routers (llm-d,\n"
		"NVIDIA Dynamo; docs/ROUTING.md): a ZeroMQ PUB socket bound at --endpoint sends\n"
		"multipart messages (topic, 8-byte big-endian sequence number, msgpack KVEventBatch).\n"
		"Each L2 entry and each L3 prefix entry (with --l3: the store bound to the arena by its\n"
		"writers) holds the whole blocks of its tokens: BlockStored when a block becomes held in a\n"
		"medium, BlockRemoved when no entry holds it any more. The first batch, and the batch after\n"
		"events were lost, is a snapshot: AllBlocksCleared, then BlockStored for everything held.\n"
		"Sequence numbers continue across publisher restarts (kept in the arena).\n"
		"  --replay EP        a ZeroMQ ROUTER socket bound at EP: a request [\"\", 8-byte big-endian\n"
		"                     start sequence] is answered with the buffered batches from there\n"
		"                     ([\"\", seq, batch] each), or with a snapshot labelled with the last\n"
		"                     sequence when they are no longer buffered, then [\"\", -1, \"\"]\n"
		"  --block-size N     tokens per block (default 16, vLLM's); a partial last block is not published\n"
		"  --format F         array (default): each event a tagged array [\"BlockStored\", fields...]\n"
		"                     as vLLM's array_like structs; map: each event a map with a \"type\" key\n"
		"                     and its fields by name (later vLLM versions, Dynamo's ZMQ relay)\n"
		"  --topic T          the first frame of every message (default empty)\n"
		"  --medium-l2 NAME   medium of L2 blocks (default cpu_shared)\n"
		"  --medium-l3 NAME   medium of L3 blocks (default disk)\n"
		"  --lora-id N        lora_id of every BlockStored (default nil)\n"
		"  --lora-name NAME   lora_name of every BlockStored (default nil)\n"
		"  --dp-rank N        data_parallel_rank of every batch (default 0, as vLLM sends it)\n"
		"  --buffer-steps N   batches kept for replay (default 10000, at most 256 MiB of them)\n"
		"  --heartbeat-ms MS  an empty batch after MS without one, so that losses show (default 1000, 0: none)\n"
		"  --l3-rescan-ms MS  compare L3 with the model this often: changes by processes not bound\n"
		"                     to the arena (default 10000, 0: never)\n"
		"  --status           print the arena's event counters and who publishes, and exit\n"
		"  --json             the start and end lines (and --status) as JSON\n"
		"One publisher per arena: a second one exits 1 naming the first. Runs until SIGINT or\n"
		"SIGTERM; needs neither root nor eBPF.\n");
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct batch {
	uint64_t seq;
	uint8_t *buf;
	size_t len;
};

struct pub {
	const char *name;
	struct sc_arena *a;
	struct sc_events *ev;
	struct sc_l3 *l3;
	struct evpub *m;
	void *ctx, *pubsock, *replay;
	const char *topic;
	int l2_ok;                    /* the arena stores token ids */
	int json;
	uint64_t next_seq;            /* the sequence of the next batch */
	uint64_t published;           /* batches sent since start */
	double last_pub;              /* CLOCK_MONOTONIC seconds of the last batch */
	/* replay buffer: a ring of the last batches */
	struct batch *ring;
	uint32_t ring_cap, ring_n, ring_first;
	uint64_t ring_bytes;
	/* scratch */
	int32_t *tok;
	uint32_t tok_cap;
	struct sc_l3_prefix_info *pinfo;
	/* counters */
	uint64_t snapshots, diffs, replays, replay_snapshots, refused, lookup_errors, events_read, lost;
};

#define RING_MAX_BYTES (256ull << 20)

/* ---- the truth ---- */

static int grow_tok(struct pub *p, uint64_t n)
{
	if (n <= p->tok_cap)
		return 0;
	uint32_t cap = p->tok_cap ? p->tok_cap : 4096;
	while (cap < n)
		cap *= 2;
	int32_t *t = realloc(p->tok, (size_t)cap * 4);
	if (!t)
		return -ENOMEM;
	p->tok = t;
	p->tok_cap = cap;
	return 0;
}

/* Look at L2 entry @key and tell the model what it holds. */
static int recheck_l2(struct pub *p, struct sc_key key)
{
	struct sc_l2_entry_info info;
	int64_t n;
	for (;;) {
		n = sc_l2_entry_tokens(p->a, key, &info, p->tok, p->tok_cap);
		if (n < 0 || (uint64_t)n <= p->tok_cap)
			break;
		if (grow_tok(p, (uint64_t)n))
			return -ENOMEM;
	}
	if (n < 0 && n != -ENOENT)
		p->lookup_errors++; /* a corrupted entry holds nothing a router can use */
	if (n <= 0)
		return evpub_set(p->m, EVPUB_L2, key, (struct sc_digest){ 0, 0 }, NULL, 0);
	return evpub_set(p->m, EVPUB_L2, key, info.digest, p->tok, (uint32_t)n);
}

static int recheck_l3(struct pub *p, struct sc_key key)
{
	int64_t n;
	for (;;) {
		n = sc_l3_prefix_get(p->l3, (struct sc_digest){ key.lo, key.hi }, p->pinfo, p->tok, p->tok_cap);
		if (n < 0 || (uint64_t)n <= p->tok_cap)
			break;
		if (grow_tok(p, (uint64_t)n))
			return -ENOMEM;
	}
	if (n < 0 && n != -ENOENT)
		p->lookup_errors++;
	if (n <= 0 || !p->pinfo->object_present)
		return evpub_set(p->m, EVPUB_L3, key, (struct sc_digest){ 0, 0 }, NULL, 0);
	return evpub_set(p->m, EVPUB_L3, key, p->pinfo->digest, p->tok, (uint32_t)n);
}

/* Every L3 entry of the model that names object @d, looked at again. */
static int recheck_l3_digest(struct pub *p, struct sc_digest d)
{
	struct evpub_key *k;
	int64_t n = evpub_keys(p->m, EVPUB_L3, &k);
	if (n < 0)
		return (int)n;
	int rc = 0;
	for (int64_t i = 0; i < n && !rc; i++)
		if (sc_digest_equal(k[i].digest, d))
			rc = recheck_l3(p, k[i].key);
	free(k);
	return rc;
}

struct keyvec {
	struct sc_key *k;
	size_t n, cap;
};

static int keyvec_add(struct keyvec *v, struct sc_key k)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		struct sc_key *nk = realloc(v->k, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		v->k = nk;
		v->cap = cap;
	}
	v->k[v->n++] = k;
	return 0;
}

static int collect_l2(const struct sc_l2_entry_info *e, void *ctx)
{
	return keyvec_add(ctx, e->key);
}

static int collect_l3(const struct sc_l3_prefix_info *info, const int32_t *tokens, void *ctx)
{
	(void)tokens;
	return keyvec_add(ctx, (struct sc_key){ info->prefix.lo, info->prefix.hi });
}

/* Bring the model of @medium to the truth: every key the model or the truth has, looked at. */
static int resync_medium(struct pub *p, int medium)
{
	struct keyvec v = { 0 };
	struct evpub_key *k;
	int64_t nk = evpub_keys(p->m, medium, &k);
	if (nk < 0)
		return (int)nk;
	int rc = 0;
	for (int64_t i = 0; i < nk && !rc; i++)
		rc = keyvec_add(&v, k[i].key);
	free(k);
	if (!rc) {
		int n = medium == EVPUB_L2 ? sc_l2_list(p->a, collect_l2, &v, 0) : sc_l3_prefix_list(p->l3, collect_l3, &v);
		if (n < 0)
			rc = n;
	}
	for (size_t i = 0; i < v.n && !rc; i++)
		rc = medium == EVPUB_L2 ? recheck_l2(p, v.k[i]) : recheck_l3(p, v.k[i]);
	free(v.k);
	return rc;
}

/* @snapshot: forget the model first (the batch then starts with AllBlocksCleared). */
static int resync(struct pub *p, int snapshot)
{
	if (snapshot) {
		evpub_clear(p->m);
		p->snapshots++;
	} else {
		p->diffs++;
	}
	int rc = p->l2_ok ? resync_medium(p, EVPUB_L2) : 0;
	if (!rc && p->l3)
		rc = resync_medium(p, EVPUB_L3);
	return rc;
}

/* ---- the wire ---- */

static void be64(uint64_t v, uint8_t out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void ring_push(struct pub *p, uint64_t seq, uint8_t *buf, size_t len, uint32_t cap)
{
	if (!p->replay || !cap) {
		free(buf);
		return;
	}
	if (!p->ring && !(p->ring = calloc(cap, sizeof(*p->ring)))) {
		free(buf);
		return;
	}
	p->ring_cap = cap;
	while (p->ring_n && (p->ring_n == p->ring_cap || p->ring_bytes + len > RING_MAX_BYTES)) {
		struct batch *b = &p->ring[p->ring_first];
		p->ring_bytes -= b->len;
		free(b->buf);
		p->ring_first = (p->ring_first + 1) % p->ring_cap;
		p->ring_n--;
	}
	p->ring[(p->ring_first + p->ring_n++) % p->ring_cap] = (struct batch){ seq, buf, len };
	p->ring_bytes += len;
}

static void send_batch(struct pub *p, uint64_t seq, const uint8_t *buf, size_t len)
{
	uint8_t s[8];
	be64(seq, s);
	/* a PUB socket never blocks: a subscriber over its high-water mark loses the message and
	 * sees the gap in the sequence numbers */
	zq.send(p->pubsock, p->topic, strlen(p->topic), ZMQ_SNDMORE);
	zq.send(p->pubsock, s, 8, ZMQ_SNDMORE);
	zq.send(p->pubsock, buf, len, 0);
}

static int publish_pending(struct pub *p, uint32_t buffer_steps)
{
	uint8_t *buf;
	int64_t len = evpub_flush(p->m, wall_now(), &buf);
	if (len < 0)
		return (int)len;
	uint64_t seq = p->next_seq++;
	sc_events_set_seq(p->ev, p->next_seq);
	send_batch(p, seq, buf, (size_t)len);
	ring_push(p, seq, buf, (size_t)len, buffer_steps);
	p->published++;
	p->last_pub = cli_now();
	return 0;
}

static void replay_send(struct pub *p, const void *id, size_t idlen, uint64_t seq, int end, const uint8_t *buf,
			size_t len)
{
	uint8_t s[8];
	be64(end ? UINT64_MAX : seq, s); /* the end marker: -1 as a signed 8-byte big-endian integer */
	zq.send(p->replay, id, idlen, ZMQ_SNDMORE);
	zq.send(p->replay, "", 0, ZMQ_SNDMORE);
	zq.send(p->replay, s, 8, ZMQ_SNDMORE);
	zq.send(p->replay, buf, len, 0);
}

#define REPLAY_MAX_FRAMES 8
/* One request from the ROUTER socket: [identity, "", 8-byte start]. Anything else is refused
 * (counted, answered with the end marker so that a waiting client goes on). */
static void replay_one(struct pub *p)
{
	zmq_msg_t fr[REPLAY_MAX_FRAMES];
	int nf = 0, more = 1, bad = 0;
	while (more) {
		zmq_msg_t m;
		zq.msg_init(&m);
		if (zq.msg_recv(&m, p->replay, ZMQ_DONTWAIT) < 0) {
			zq.msg_close(&m);
			bad = 1;
			break;
		}
		more = zq.msg_more(&m);
		if (nf < REPLAY_MAX_FRAMES)
			fr[nf++] = m;
		else {
			zq.msg_close(&m);
			bad = 1;
		}
	}
	if (nf != 3 || zq.msg_size(&fr[1]) != 0 || zq.msg_size(&fr[2]) != 8)
		bad = 1;
	if (bad) {
		p->refused++;
		if (nf >= 1)
			replay_send(p, zq.msg_data(&fr[0]), zq.msg_size(&fr[0]), 0, 1, NULL, 0);
	} else {
		const uint8_t *b = zq.msg_data(&fr[2]);
		uint64_t start = 0;
		for (int i = 0; i < 8; i++)
			start = start << 8 | b[i];
		const void *id = zq.msg_data(&fr[0]);
		size_t idlen = zq.msg_size(&fr[0]);
		uint64_t last = p->next_seq - 1; /* a batch was published at start: next_seq >= 1 */
		p->replays++;
		if (start <= last) {
			uint64_t oldest = p->ring_n ? p->ring[p->ring_first].seq : UINT64_MAX;
			if (start >= oldest) {
				for (uint32_t i = 0; i < p->ring_n; i++) {
					const struct batch *bt = &p->ring[(p->ring_first + i) % p->ring_cap];
					if (bt->seq >= start)
						replay_send(p, id, idlen, bt->seq, 0, bt->buf, bt->len);
				}
			} else {
				/* no longer buffered: the model as of the last batch */
				uint8_t *buf;
				int64_t len = evpub_snapshot(p->m, wall_now(), &buf);
				if (len >= 0) {
					replay_send(p, id, idlen, last, 0, buf, (size_t)len);
					free(buf);
					p->replay_snapshots++;
				}
			}
		}
		replay_send(p, id, idlen, 0, 1, NULL, 0);
	}
	for (int i = 0; i < nf; i++)
		zq.msg_close(&fr[i]);
}

/* ---- setup ---- */

static int open_sockets(struct pub *p, const char *endpoint, const char *replay_ep)
{
	if (!(p->ctx = zq.ctx_new()) || !(p->pubsock = zq.socket(p->ctx, ZMQ_PUB)))
		return cli_fail("events", -zq.errno_(), "cannot make a ZeroMQ context or socket");
	int hwm = 100000, linger = 0;
	zq.setsockopt(p->pubsock, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zq.setsockopt(p->pubsock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zq.bind(p->pubsock, endpoint)) {
		fprintf(stderr, "stagecache events: cannot bind --endpoint %s: %s\n", cli_q(endpoint), zq.strerror_(zq.errno_()));
		return EXIT_FAIL;
	}
	if (replay_ep) {
		if (!(p->replay = zq.socket(p->ctx, ZMQ_ROUTER)))
			return cli_fail("events", -zq.errno_(), "cannot make the replay socket");
		int64_t maxmsg = 64; /* a request is a few bytes: a client that sends more is disconnected */
		zq.setsockopt(p->replay, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
		zq.setsockopt(p->replay, ZMQ_LINGER, &linger, sizeof(linger));
		if (zq.bind(p->replay, replay_ep)) {
			fprintf(stderr, "stagecache events: cannot bind --replay %s: %s\n", cli_q(replay_ep),
				zq.strerror_(zq.errno_()));
			return EXIT_FAIL;
		}
	}
	return EXIT_OK;
}

static int print_status(struct sc_arena *a, const char *name, int json)
{
	struct sc_events_stats st;
	int rc = sc_events_stats(a, &st);
	if (rc)
		return cli_l2_error("events", rc, name, "cannot read the event counters");
	if (json) {
		printf("{\"arena\":");
		cli_json_str(stdout, name);
		printf(",\"records\":%u,\"listening\":%s,\"listener_token\":%u,\"listener_pid\":%u,\"listener_since_ns\":%llu,"
		       "\"appended\":%llu,\"consumed\":%llu,\"pending\":%llu,\"dropped\":%llu,\"lost\":%llu,\"resets\":%llu,"
		       "\"next_seq\":%llu}\n",
		       st.records, st.listener && st.listener_alive ? "true" : "false", st.listener, st.listener_pid,
		       (unsigned long long)st.listener_since_ns, (unsigned long long)st.appended,
		       (unsigned long long)st.consumed, (unsigned long long)st.pending, (unsigned long long)st.dropped,
		       (unsigned long long)st.lost, (unsigned long long)st.resets, (unsigned long long)st.seq);
	} else {
		printf("arena %s: event ring of %u records\n", name, st.records);
		if (st.listener && st.listener_alive)
			printf("publisher: token %u (pid %u in its own namespace)\n", st.listener, st.listener_pid);
		else
			printf("publisher: none%s\n", st.listener ? " (a dead one's role is cleared by the next reap)" : "");
		printf("appended %llu, consumed %llu, pending %llu, dropped %llu, lost %llu, resets %llu, next batch %llu\n",
		       (unsigned long long)st.appended, (unsigned long long)st.consumed, (unsigned long long)st.pending,
		       (unsigned long long)st.dropped, (unsigned long long)st.lost, (unsigned long long)st.resets,
		       (unsigned long long)st.seq);
	}
	return EXIT_OK;
}

static void print_line(struct pub *p, const char *what, const char *endpoint, const char *replay_ep)
{
	if (p->json) {
		printf("{\"event\":\"%s\",\"arena\":", what);
		cli_json_str(stdout, p->name);
		if (endpoint) {
			printf(",\"endpoint\":");
			cli_json_str(stdout, endpoint);
			printf(",\"replay\":");
			if (replay_ep)
				cli_json_str(stdout, replay_ep);
			else
				printf("null");
		}
		printf(",\"next_seq\":%llu,\"batches\":%llu,\"events_read\":%llu,\"lost\":%llu,\"snapshots\":%llu,"
		       "\"resyncs\":%llu,\"replays\":%llu,\"replay_snapshots\":%llu,\"replays_refused\":%llu,"
		       "\"l2_entries\":%llu,\"l2_blocks\":%llu,\"l3_entries\":%llu,\"l3_blocks\":%llu}\n",
		       (unsigned long long)p->next_seq, (unsigned long long)p->published, (unsigned long long)p->events_read,
		       (unsigned long long)p->lost, (unsigned long long)p->snapshots, (unsigned long long)p->diffs,
		       (unsigned long long)p->replays, (unsigned long long)p->replay_snapshots,
		       (unsigned long long)p->refused, (unsigned long long)evpub_entries(p->m, EVPUB_L2),
		       (unsigned long long)evpub_blocks(p->m, EVPUB_L2), (unsigned long long)evpub_entries(p->m, EVPUB_L3),
		       (unsigned long long)evpub_blocks(p->m, EVPUB_L3));
	} else if (endpoint) {
		printf("stagecache events: publishing arena %s on %s%s%s from batch %llu (%llu L2 blocks, %llu L3 blocks)\n",
		       p->name, endpoint, replay_ep ? ", replay on " : "", replay_ep ? replay_ep : "",
		       (unsigned long long)p->next_seq - 1, (unsigned long long)evpub_blocks(p->m, EVPUB_L2),
		       (unsigned long long)evpub_blocks(p->m, EVPUB_L3));
	} else {
		printf("stagecache events: %s: %llu batches, %llu events read, %llu lost, %llu snapshots, %llu resyncs, "
		       "%llu replays (%llu snapshots, %llu refused)\n",
		       what, (unsigned long long)p->published, (unsigned long long)p->events_read,
		       (unsigned long long)p->lost, (unsigned long long)p->snapshots, (unsigned long long)p->diffs,
		       (unsigned long long)p->replays, (unsigned long long)p->replay_snapshots,
		       (unsigned long long)p->refused);
	}
	fflush(stdout);
}

/* ---- the loop ---- */

#define READ_MAX 1024

static int run(struct pub *p, const char *endpoint, const char *replay_ep, uint32_t buffer_steps,
	       uint32_t heartbeat_ms, uint32_t rescan_ms)
{
	struct sc_event *evs = malloc(READ_MAX * sizeof(*evs));
	if (!evs)
		return cli_fail("events", -ENOMEM, "cannot start");
	int rc = resync(p, 1);
	if (!rc)
		rc = publish_pending(p, buffer_steps);
	if (!rc)
		print_line(p, "start", endpoint, replay_ep);
	double next_rescan = cli_now() + rescan_ms / 1000.0;
	while (!rc && !stop) {
		int n = sc_events_read(p->ev, evs, READ_MAX);
		int snapshot = 0, diff = 0;
		if (n == -EBADMSG) {
			fprintf(stderr, "stagecache events: the event ring of arena %s is corrupted: reset, snapshot follows\n",
				p->name);
			sc_events_reset(p->ev);
			snapshot = 1;
			n = 0;
		} else if (n < 0) {
			rc = n;
			break;
		}
		p->events_read += (uint64_t)n;
		for (int i = 0; i < n && !rc; i++) {
			const struct sc_event *e = &evs[i];
			switch (e->type) {
			case SC_EVENT_LOST:
				p->lost += e->token_count;
				if (e->lost_why == SC_EVENT_LOST_WRITER_DIED)
					diff = 1;
				else
					snapshot = 1;
				break;
			case SC_EVENT_L2_STORED:
			case SC_EVENT_L2_REMOVED:
				if (p->l2_ok && !snapshot)
					rc = recheck_l2(p, e->key);
				break;
			case SC_EVENT_L2_CLEARED:
				diff = 1;
				break;
			case SC_EVENT_L3_STORED:
			case SC_EVENT_L3_REMOVED:
				if (p->l3 && !snapshot)
					rc = recheck_l3(p, e->key);
				break;
			case SC_EVENT_L3_OBJECT_GONE:
				if (p->l3 && !snapshot)
					rc = recheck_l3_digest(p, e->digest);
				break;
			}
		}
		if (rc == -ENOMEM) {
			snapshot = 1; /* the model is unreliable: start it again */
			rc = 0;
		}
		if (p->l3 && rescan_ms && cli_now() >= next_rescan) {
			diff = 1;
			next_rescan = cli_now() + rescan_ms / 1000.0;
		}
		if (snapshot)
			rc = resync(p, 1);
		else if (diff)
			rc = resync(p, 0);
		if (rc)
			break;
		if (evpub_pending(p->m) || (heartbeat_ms && cli_now() - p->last_pub >= heartbeat_ms / 1000.0))
			rc = publish_pending(p, buffer_steps);
		/* replay requests, and the pause between reads (none while the ring has more) */
		zmq_pollitem_t it = { .socket = p->replay, .events = ZMQ_POLLIN };
		int timeout = n == READ_MAX ? 0 : 5;
		int ready = zq.poll(p->replay ? &it : NULL, p->replay ? 1 : 0, timeout);
		for (int k = 0; ready > 0 && (it.revents & ZMQ_POLLIN) && k < 16 && !rc; k++) {
			replay_one(p);
			it.revents = 0;
			ready = zq.poll(&it, 1, 0);
		}
	}
	free(evs);
	if (rc)
		return cli_fail("events", rc, "publishing arena %s failed", p->name);
	print_line(p, "stop", NULL, NULL);
	return EXIT_OK;
}

int cmd_events(int argc, char **argv)
{
	const char *dir = NULL, *name = NULL, *endpoint = NULL, *replay_ep = NULL, *l3dir = NULL, *topic = "";
	const char *m2 = "cpu_shared", *m3 = "disk", *format = "array", *lora_name = NULL;
	uint32_t block = 16, buffer_steps = 10000, heartbeat_ms = 1000, rescan_ms = 10000;
	uint64_t lora = UINT64_MAX, dp = 0;
	int status = 0, json = 0;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },
		{ "owner", CLI_OWNER },
		{ "endpoint", CLI_STR, &endpoint },
		{ "replay", CLI_STR, &replay_ep },
		{ "l3", CLI_STR, &l3dir },
		{ "topic", CLI_STR, &topic },
		{ "medium-l2", CLI_STR, &m2 },
		{ "medium-l3", CLI_STR, &m3 },
		{ "block-size", CLI_U32, &block, 1, 1u << 20, .want = "a number of tokens, 1..1048576" },
		{ "buffer-steps", CLI_U32, &buffer_steps, 0, 1u << 24, .want = "a number of batches" },
		{ "heartbeat-ms", CLI_U32, &heartbeat_ms, 0, 3600000, .want = "milliseconds (0: none)" },
		{ "l3-rescan-ms", CLI_U32, &rescan_ms, 0, 86400000, .want = "milliseconds (0: never)" },
		{ "lora-id", CLI_U64, &lora, 0, INT64_MAX, .want = "a number" },
		{ "dp-rank", CLI_U64, &dp, 0, INT64_MAX, .want = "a number" },
		{ "format", CLI_STR, &format },
		{ "lora-name", CLI_STR, &lora_name },
		{ "status", CLI_FLAG, &status },
		{ "json", CLI_FLAG, &json },
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("events", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (!status && !endpoint)
		return cli_usage_error("events", "--endpoint is required (e.g. tcp://127.0.0.1:5557)");
	if (!*m2 || !*m3)
		return cli_usage_error("events", "a medium name may not be empty");
	if (strcmp(format, "array") && strcmp(format, "map"))
		return cli_usage_error("events", "--format '%s': want array or map", cli_q(format));
	struct sc_arena *a;
	if ((rc = cli_open_arena("events", dir, name, &a)))
		return rc;
	if (status) {
		rc = print_status(a, name, json);
		sc_arena_close(a);
		return rc;
	}
	if ((rc = zmq_load())) {
		sc_arena_close(a);
		return rc;
	}
	struct pub p = { .name = name, .a = a, .topic = topic, .json = json };
	struct sc_arena_info ai;
	p.l2_ok = sc_arena_info(a, &ai) == 0 && !(ai.flags & SC_ARENA_NO_TOKEN_VERIFY);
	if (!p.l2_ok)
		fprintf(stderr, "stagecache events: arena %s stores no token ids (created with token verification off): "
				"its L2 blocks cannot be published\n", name);
	struct evpub_opts eo = { .block_size = block, .medium = { m2, m3 }, .has_lora_id = lora != UINT64_MAX,
				 .lora_id = (int64_t)lora, .has_dp_rank = 1, .dp_rank = (int64_t)dp,
				 .map_events = !strcmp(format, "map"), .lora_name = lora_name };
	int ret = EXIT_FAIL;
	if (!(p.m = evpub_new(&eo)) || !(p.pinfo = malloc(sizeof(*p.pinfo)))) {
		cli_fail("events", -ENOMEM, "cannot start");
		goto cleanup;
	}
	if (l3dir) {
		struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_CREATE | SC_L3_OPEN_NO_RECONCILE };
		if ((rc = sc_l3_open(l3dir, &lo, &p.l3))) {
			ret = l3cli_open_error("events", rc, l3dir, &lo);
			goto cleanup;
		}
	}
	rc = sc_events_open(a, &p.ev);
	if (rc == -EBUSY) {
		struct sc_events_stats st;
		if (sc_events_stats(a, &st) == 0 && st.listener)
			fprintf(stderr, "stagecache events: arena %s already has a publisher (owner token %u, pid %u in its own "
					"namespace): one publisher per arena\n", name, st.listener, st.listener_pid);
		else
			fprintf(stderr, "stagecache events: arena %s already has a publisher: one publisher per arena\n", name);
		goto cleanup;
	}
	if (rc) {
		ret = cli_l2_error("events", rc, name, "cannot listen to the event ring");
		goto cleanup;
	}
	if ((ret = open_sockets(&p, endpoint, replay_ep)))
		goto cleanup;
	p.next_seq = sc_events_seq(p.ev);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* the start line is printed once the first (snapshot) batch is out */
	ret = run(&p, endpoint, replay_ep, buffer_steps, heartbeat_ms, rescan_ms);
cleanup:
	for (uint32_t i = 0; i < p.ring_n; i++)
		free(p.ring[(p.ring_first + i) % p.ring_cap].buf);
	free(p.ring);
	if (p.replay)
		zq.close(p.replay);
	if (p.pubsock)
		zq.close(p.pubsock);
	if (p.ctx)
		zq.ctx_term(p.ctx);
	sc_events_close(p.ev);
	sc_l3_close(p.l3);
	evpub_free(p.m);
	free(p.pinfo);
	free(p.tok);
	sc_arena_close(a);
	return ret;
}
