"""make check: `stagecache exporter` scraped by the real Debian `prometheus` on the loopback.

A scripted workload (a second Python process through the bindings) exercises every counter:
two stages, hits, misses, a location mismatch, refusals, L3 puts, fills, promotions, restores
from L2, a ring that fills up, commits delivered and pending, a lease still held. While that
process stays attached and idle, the test takes `stagecache stats NAME --l3 DIR --json` right
after a scrape, waits for the next scrape, and checks through Prometheus's HTTP API that every
value scraped equals the one stats printed — each JSON number has its series, and each series of
the arena was checked. Then the HTTP edges of the exporter (404, 405, HEAD, --once, usage).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("SC_BUILD", "build"))
CLI = os.path.join(BUILD, "stagecache")
PROMETHEUS = os.environ.get("PROMETHEUS", "/usr/bin/prometheus")

checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, method="GET", headers=None, timeout=10):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


WORKLOAD = r"""
import sys, stagecache as sc
name, l3dir = sys.argv[1], sys.argv[2]
a = sc.Arena.open(name)
l3 = sc.L3(l3dir)
A = a.stage("llama-3-8b", "kv-fp16")
B = a.stage("mamba-2.8b", "recurrent")
blob = lambda n, s: bytes((i * 13 + s) & 0xff for i in range(n))
digests = [A.admit("t", list(range(k + 1)), blob(5000 + k, k)) for k in range(5)]
for k in range(7):
    A.get("t", list(range(k % 5 + 1))).release()            # 7 hits
for k in range(3):
    assert A.get("t", [99, k]) is None                      # 3 misses
assert A.get("t", [0], location=(1, sc.digest(b"other"))) is None  # a stale mirror: removed, a miss
try:
    A.admit("t", [7], b"payload", digest=sc.digest(b"not it"))
except sc.Error:
    pass                                                    # refused: the digest
try:
    A.admit("t", [8], b"x" * (40 << 20))
except sc.Error:
    pass                                                    # refused: larger than the budget
B.admit("r", [1, 2], blob(3000, 1))
B.admit("r", [1, 2, 3], blob(3000, 2))
B.get("r", [1, 2]).release()
# L3: a short prefix (promoted on its second fill) and a long one (promoted on the first)
toks = list(range(1, 5001))
l3.put("t", toks[:100], blob(20000, 3))
l3.put("t", toks, blob(30000, 4), model_identity="llama-3-8b", state_identity="kv-fp16")
l3.put("t", toks[:100], blob(20000, 3))                     # already present
for _ in range(3):
    A.restore(l3, "t", toks[:300]).release()                 # l3, l3 promoted, l2
A.restore(l3, "t", toks).release()                           # long prefix: promoted at once
# rings: one producer's commits, some delivered, some pending; a small ring filled up
ring = a.ring()
with sc.Batcher(ring, 42, 1, interval_ns=0) as b:
    for t in range(20):
        b.commit(t, t)
a.poll(7)
while ring.submit(43, 1, 1, [1] * 64):
    pass
# a lease still held while the counters are scraped
held = A.get("t", [0, 1])
a.l2_stats()                                                 # flushes this handle's hit/miss counts
print("ready", flush=True)
sys.stdin.read()
held.release()
"""


def flatten(stats, info):
    """stats --json (+ info --json) -> {(metric, frozenset(labels)): value}."""
    arena = stats["_arena"]
    out = {}

    def put(metric, value, **labels):
        labels["arena"] = arena
        out[(metric, frozenset(labels.items()))] = float(value)
    counters_l2 = {"hits", "misses", "inserts", "evictions", "admission_rejects", "refused_bytes", "moved_to_main",
                   "ghost_hits", "segment_dedup_bytes", "refused_low_benefit", "credit_kept"}
    # why lookups and restores missed: one series per reason
    misses = {"l2_misses": "stagecache_misses_total", "restore_misses": "stagecache_restore_misses_total",
              "l2_misses_refused": "stagecache_misses_refused_total",
              "restore_deadline": "stagecache_restore_deadline_total"}
    stage_misses = {"l2_misses": "stagecache_stage_misses_total",
                    "restore_misses": "stagecache_stage_restore_misses_total"}
    for k, v in stats["l2"].items():
        if k == "refused":
            for why, n in v.items():
                put("stagecache_l2_refused_total", n, reason=why)
            continue
        if k in misses:
            for why, n in v.items():
                put(misses[k], n, reason=why)
            continue
        name = "largest_free_block_bytes" if k == "largest_free_block" else k
        put("stagecache_l2_" + name + ("_total" if k in counters_l2 else ""), v)
    for k, v in stats["promotion"].items():
        if k == "refused":
            for why, n in v.items():
                put("stagecache_promotion_refused_total", n, reason=why)
            continue
        gauge = k in ("observations", "claims", "capacity")
        put("stagecache_promotion_" + k + ("" if gauge else "_total"), v)
    gauges_ix = {"capacity", "refresh_ms", "positive", "negative", "pages", "free_pages", "token_verify", "bound"}
    for k, v in stats["l3_index"].items():
        put("stagecache_l3_index_" + k + ("" if k in gauges_ix else "_total"), int(v) if isinstance(v, bool) else v)
    for k, v in stats["key_collisions"].items():
        if k != "total":  # the sum of the levels: Prometheus sums for itself
            put("stagecache_key_collisions_total", v, level=k)
    for r in stats["rings"]:
        ring = str(r["ring"])
        for k, v in r.items():
            if k in ("ring", "state_name", "producer_pid"):
                continue  # a label, a name, and a pid (for people, not a metric)
            metric = {"records": "records_total", "delivered": "delivered_total", "ring_full": "full_total",
                      "ring_bytes": "capacity_bytes"}.get(k, k)
            put("stagecache_ring_" + metric, int(v) if isinstance(v, bool) else v, ring=ring)
    for s in stats["stages"]:
        for k, v in s.items():
            if k == "stage":
                continue
            if k in stage_misses:
                for why, n in v.items():
                    put(stage_misses[k], n, stage=s["stage"], reason=why)
                continue
            put("stagecache_stage_" + k + ("_total" if k in counters_l2 else ""), v, stage=s["stage"])
    put("stagecache_attached_processes", stats["attached"])
    put("stagecache_up", 1)
    put("stagecache_arena_size_bytes", info["size_bytes"])
    put("stagecache_arena_heap_bytes", info["heap_bytes"])
    put("stagecache_arena_page_size_bytes", info["page_size"])
    l3 = stats["l3"]
    for k, v in l3.items():
        if k == "dir":
            continue
        gauge = k in ("objects", "bytes", "budget_bytes", "logical_bytes", "physical_bytes", "saved_bytes", "segments")
        if k == "fill_ns":
            out[("stagecache_l3_fill_seconds_total", frozenset({("dir", l3["dir"])}))] = v / 1e9
            continue
        out[("stagecache_l3_" + k + ("" if gauge else "_total"), frozenset({("dir", l3["dir"])}))] = float(v)
    out[("stagecache_l3_up", frozenset({("dir", l3["dir"])}))] = 1.0
    return out


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print("no prometheus at %s: run make deps (Debian package prometheus)" % PROMETHEUS)
        return 1
    tag = "exp-%d" % os.getpid()
    work = tempfile.mkdtemp(prefix="sc-%s-" % tag, dir="/var/tmp")
    l3dir = os.path.join(work, "l3")
    procs = []
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1",
               STAGECACHE_LIB=os.path.join(BUILD, "libstagecache.so.0"))
    try:
        subprocess.run([CLI, "create", tag, "--size", "32M", "--huge", "off", "--rings", "4", "--ring-bytes", "4K"],
                       check=True, stdout=subprocess.DEVNULL)
        os.makedirs(l3dir)
        subprocess.run([sys.executable, "-c", "import stagecache as sc; sc.L3(%r).close()" % l3dir], env=env,
                       check=True)

        # usage and one-shot behaviour
        r = subprocess.run([CLI, "exporter"], capture_output=True, text=True)
        check(r.returncode == 2 and "missing NAME" in r.stderr, "exporter with no NAME: exit 2 (%d)" % r.returncode)
        r = subprocess.run([CLI, "exporter", tag, "--listen", "nowhere"], capture_output=True, text=True)
        check(r.returncode == 2 and "--listen" in r.stderr, "a bad --listen: exit 2 (%d)" % r.returncode)
        r = subprocess.run([CLI, "exporter", tag, "--l3", l3dir, "--once"], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.endswith("# EOF\n") and 'stagecache_up{arena="%s"} 1' % tag in r.stdout,
              "--once prints OpenMetrics (%d)" % r.returncode)
        r = subprocess.run([CLI, "exporter", tag, "no-such-arena", "--once"], capture_output=True, text=True)
        check(r.returncode == 1 and 'stagecache_up{arena="no-such-arena"} 0' in r.stdout and
              "cannot read arena 'no-such-arena'" in r.stderr, "--once with a missing arena: up 0, exit 1")
        r = subprocess.run([CLI, "exporter", "--help"], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.startswith("usage: stagecache exporter"), "--help")

        # the exporter, then Prometheus scraping it every second
        exp = subprocess.Popen([CLI, "exporter", tag, "--l3", l3dir, "--listen", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(exp)
        line = exp.stdout.readline()
        check(line.startswith("listening on http://127.0.0.1:"), "the exporter says where it listens: %r" % line)
        base = line.split()[-1].rsplit("/", 1)[0]
        status, headers, body = http(base + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        check(status == 200 and headers.get("Content-Type", "").startswith("application/openmetrics-text") and
              body.endswith("# EOF\n"), "OpenMetrics when asked for it")
        status, headers, body = http(base + "/metrics")
        check(status == 200 and "version=0.0.4" in headers.get("Content-Type", "") and "# EOF" not in body and
              "# TYPE stagecache_l2_hits_total counter" in body, "the classic text format otherwise")
        check(http(base + "/nope")[0] == 404, "404 elsewhere")
        check(http(base + "/metrics", method="POST")[0] == 405, "405 for POST")
        status, _, body = http(base + "/metrics", method="HEAD")
        check(status == 200 and body == "", "HEAD")

        prom_dir = os.path.join(work, "prometheus")
        os.makedirs(prom_dir)
        with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
                    "  - job_name: stagecache\n    static_configs:\n      - targets: ['%s']\n" % base[len("http://"):])
        for attempt in range(3):
            port = free_port()
            prom = subprocess.Popen([PROMETHEUS, "--config.file=" + os.path.join(prom_dir, "prometheus.yml"),
                                     "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
                                     "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(prom_dir, "log"), "w"))
            procs.append(prom)
            api = "http://127.0.0.1:%d" % port
            deadline = time.time() + 60
            while time.time() < deadline and prom.poll() is None:
                try:
                    if http(api + "/-/ready", timeout=2)[0] == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            if prom.poll() is None:
                break
        else:
            print(open(os.path.join(prom_dir, "log")).read())
            check(False, "prometheus started")
            return 1
        print("prometheus", subprocess.run([PROMETHEUS, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
              "on", api, "scraping", base, flush=True)

        def query(q):
            status, _, body = http(api + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
            data = json.loads(body)
            if data.get("status") != "success":
                raise RuntimeError("query %s: %s" % (q, body))
            return data["data"]["result"]

        def last_scrape():
            res = query('timestamp(stagecache_up{arena="%s"})' % tag)
            return float(res[0]["value"][1]) if res else 0.0

        def next_scrape(after, timeout=30):
            deadline = time.time() + timeout
            while time.time() < deadline:
                t = last_scrape()
                if t > after:
                    return t
                time.sleep(0.05)
            raise RuntimeError("no scrape after %.3f" % after)

        # the workload: a second process that stays attached, idle, holding a lease
        wl = subprocess.Popen([sys.executable, "-c", WORKLOAD, tag, l3dir], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(wl)
        ready = wl.stdout.readline().strip()
        if ready != "ready":
            print(wl.stderr.read())
            check(False, "the workload ran")
            return 1
        done = time.time()

        # stats right after a scrape (so no scrape's attach overlaps it), then the next scrape
        t1 = next_scrape(done)
        stats = json.loads(subprocess.run([CLI, "stats", tag, "--l3", l3dir, "--json"], check=True,
                                          capture_output=True, text=True).stdout)
        info = json.loads(subprocess.run([CLI, "info", tag, "--json"], check=True, capture_output=True,
                                         text=True).stdout)
        next_scrape(t1)
        stats["_arena"] = tag
        expected = flatten(stats, info)

        scraped = {}
        for series in query('{__name__=~"stagecache_.+"}'):
            m = dict(series["metric"])
            name = m.pop("__name__")
            m.pop("job", None)
            m.pop("instance", None)
            scraped[(name, frozenset(m.items()))] = float(series["value"][1])
        up = query('up{job="stagecache"}')
        check(up and up[0]["value"][1] == "1", "Prometheus scraped the exporter successfully (up == 1)")

        # the workload really moved the counters it was meant to
        l2, ps = stats["l2"], stats["promotion"]
        check(l2["hits"] >= 9 and l2["misses"] >= 4 and l2["admission_rejects"] >= 2 and l2["refused_bytes"] > 0 and
              l2["leases"] == 1 and ps["promoted"] >= 2 and stats["l3"]["fills"] >= 3 and
              stats["l3"]["put_dedup"] >= 1 and stats["attached"] == 2 and len(stats["stages"]) == 2 and
              any(r["ring_full"] > 0 for r in stats["rings"]) and any(r["depth_records"] > 0 for r in stats["rings"])
              and any(r["delivered"] > 0 for r in stats["rings"]),
              "the workload exercised every kind of counter: %s" % json.dumps(stats))

        for key, want in sorted(expected.items(), key=lambda kv: kv[0][0]):
            got = scraped.get(key)
            if key[0] == "stagecache_l3_fill_seconds_total" and got is not None:
                check(abs(got - want) < 1e-9, "%s: scraped %r, stats %r" % (key, got, want))
            else:
                check(got == want, "%s %s: scraped %r, stats --json %r" % (key[0], dict(key[1]), got, want))
        extra = [k for k in scraped if k not in expected and (dict(k[1]).get("arena") == tag or "dir" in dict(k[1]))]
        check(not extra, "series scraped that stats --json does not have: %s" % extra)
        print("compared %d series of %s with stagecache stats --json" % (len(expected), tag), flush=True)

        wl.stdin.close()
        check(wl.wait(timeout=30) == 0, "the workload exited cleanly")
        exp.send_signal(signal.SIGTERM)
        check(exp.wait(timeout=30) == 0, "the exporter exits 0 on SIGTERM")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run([CLI, "destroy", tag], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
        total = checks
        print("%d%%: Checks: %d, Failures: %d, Errors: 0" % (100 * (total - failures) // max(total, 1), total, failures))


if __name__ == "__main__":
    rc = main()
    sys.exit(1 if rc or failures else 0)
