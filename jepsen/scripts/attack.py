#!/usr/bin/env python3
"""Bot armies against a running Sluice node, with each entry policy off and on: places taken by
one address and by 100 addresses, by 10,000 identities without a valid assertion, by a bot that
solves proofs of work natively; and the share of honest winners of a lottery with 20 honest and
200 bot attempts under each policy.

The node must believe X-Forwarded-For from 127.0.0.1 (`trusted_proxies = ["127.0.0.1"]`), so
that one process can play many addresses, and must have `[identity]` with the HS256 secret given
here (base64 of SHOP_SECRET) and `issuer = "shop"`. Example (one node, release build):

    python3 jepsen/scripts/attack.py http://127.0.0.1:8080 "$(cat admin-token)" --seconds 10

`flood` measures honest visitors who solve, joining without and then during a flood of requests
for challenges from 1,000 addresses (wrk with jepsen/scripts/challenge_flood.lua):

    python3 jepsen/scripts/attack.py http://127.0.0.1:8080 "$(cat admin-token)" flood --seconds 10

`presolve` prepares an independent generator's run instead: it makes room ROOM with the given
proof-of-work rule (or none), and writes COUNT join bodies, each with its own solved challenge,
for `wrk -s jepsen/scripts/join.lua` (BENCHMARKS.md, *Join throughput with proofs*):

    python3 jepsen/scripts/attack.py http://127.0.0.1:8080 "$(cat admin-token)" \
        presolve --room thr --work 1 --cost 2000 --count 40000 > bodies.jsonl
"""
import argparse, base64, concurrent.futures as cf, hashlib, json, random, resource, time
import urllib.error, urllib.request

SHOP_SECRET = b"attack harness shop secret, 32 bytes or more!"
HELD = {"capacity": 10, "paused": True, "admit_per_minute": 600000, "session_ttl_secs": 600,
        "waiter_ttl_secs": 600, "max_waiting": 1000000}


def call(base, method, path, body=None, token=None, headers=None):
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def room(base, token, name, entry, mode="fifo"):
    call(base, "DELETE", f"/v1/rooms/{name}", token=token)
    s, v = call(base, "PUT", f"/v1/rooms/{name}", dict(HELD, mode=mode, entry=entry), token=token)
    assert s in (200, 201), (s, v)


def address(i):
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def solve(base, name, headers=None):
    s, c = call(base, "GET", f"/v1/rooms/{name}/challenge", headers=headers)
    if s != 200:
        return None  # refused (busy, rate-limited): no challenge to solve
    p = c["parameters"]
    nonce, salt, prefix = bytes.fromhex(p["nonce"]), bytes.fromhex(p["salt"]), p["keyPrefix"]
    # (Builds before 2026-12-06 issued counters start..start+work instead of start..end.)
    end = p["data"].get("end", p["data"]["start"] + p["data"].get("work", 0))
    for counter in range(p["data"]["start"], end):
        key = hashlib.pbkdf2_hmac("sha256", nonce + counter.to_bytes(4, "big"), salt, p["cost"], 32)
        if key.hex().startswith(prefix):
            return base64.b64encode(json.dumps({"challenge": c, "solution": {
                "counter": counter, "derivedKey": key.hex()}}).encode()).decode()


def assertion(sub, secret=SHOP_SECRET):
    import jwt
    return jwt.encode({"sub": sub, "iss": "shop", "exp": int(time.time()) + 600}, secret, "HS256")


def bot_join(base, name, policy, i):
    """One bot attempt: what a bot can bring under `policy`."""
    body, headers = {}, {"X-Forwarded-For": address(i % policy.get("addresses", 1))}
    if policy.get("pow"):
        body["altcha"] = solve(base, name)
    if policy.get("identity"):
        body["identity"] = assertion(f"bot-{i}", b"a secret the bot guessed, 32 bytes long")
    s, v = call(base, "POST", f"/v1/rooms/{name}/join", body, headers=headers)
    return s == 200, v.get("visitor_id")


def honest_join(base, name, policy, i):
    body = {}
    if policy.get("pow"):
        body["altcha"] = solve(base, name)
    if policy.get("identity"):
        body["identity"] = assertion(f"customer-{i}")
    s, v = call(base, "POST", f"/v1/rooms/{name}/join", body,
                headers={"X-Forwarded-For": f"192.168.{i}.1"})
    assert s == 200, (s, v)
    return v["visitor_id"], v["ticket"]


POLICIES = {
    "none": ({}, {}),
    "places_per_client_max=4": ({"places_per_client_max": 4}, {}),
    "proof_of_work": ({"proof_of_work": {"work": 5500, "cost": 2000}}, {"pow": True}),
    "identity_required": ({"identity_required": True}, {"identity": True}),
}


def places(base, token, seconds, label, entry, bot, addresses, workers):
    """Bots join for `seconds` from `addresses` addresses: places taken per minute."""
    name = "atk"
    room(base, token, name, entry)
    bot = dict(bot, addresses=addresses)
    stop, taken, tried, t0 = time.time() + seconds, 0, 0, cpu()
    with cf.ThreadPoolExecutor(workers) as ex:
        i = 0
        futures = set()
        while time.time() < stop:
            while len(futures) < workers * 2:
                futures.add(ex.submit(bot_join, base, name, bot, i))
                i += 1
            done, futures = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
            for f in done:
                tried += 1
                taken += f.result()[0]
        for f in futures:
            tried += 1
            taken += f.result()[0]
    spent = cpu() - t0
    return {"policy": label, "addresses": addresses, "attempts": tried, "places": taken,
            "places_per_minute": round(taken * 60 / seconds),
            "bot_cpu_seconds_per_place": round(spent / taken, 3) if taken else None}


def lottery(base, token, label, entry, bot, budget_seconds):
    """20 honest visitors and up to 200 bot attempts (10 addresses, for at most
    `budget_seconds`), then a lottery draw of 10: the share of winners who are honest."""
    name = "lot-atk"
    room(base, token, name, entry, mode="lottery")
    honest = [honest_join(base, name, bot, i) for i in range(20)]
    stop, bots = time.time() + budget_seconds, 0
    b = dict(bot, addresses=10)
    with cf.ThreadPoolExecutor(4) as ex:
        futures = [ex.submit(lambda i: time.time() < stop and bot_join(base, name, b, i)[0], i)
                   for i in range(200)]
        bots = sum(1 for f in futures if f.result())
    call(base, "POST", f"/v1/rooms/{name}/resume", {}, token=token)
    winners = honest_winners = 0
    deadline = time.time() + 10
    while time.time() < deadline:
        s, r = call(base, "GET", f"/v1/rooms/{name}", token=token)
        if r.get("active", 0) >= 10:
            break
        time.sleep(0.1)
    for vid, ticket in honest:
        s, v = call(base, "GET", f"/v1/rooms/{name}/status?ticket={ticket}")
        honest_winners += v.get("state") == "admitted"
    s, r = call(base, "GET", f"/v1/rooms/{name}", token=token)
    winners = r.get("active", 0)
    return {"policy": label, "honest": 20, "bot_places": bots, "winners": winners,
            "honest_winners": honest_winners,
            "honest_share": round(honest_winners / winners, 2) if winners else None}


def only_throughput(a):
    for label, entry, bot in [("join throughput, no proof", {}, {}),
                              ("join throughput, proof (work 1, cost 2000)",
                               {"proof_of_work": {"work": 1, "cost": 2000}}, {"pow": True})]:
        print(json.dumps(places(a.base, a.token, a.seconds, label, entry, bot, 100, a.workers)),
              flush=True)


def flood(a):
    """Honest visitors who solve, joining for `seconds` without a flood and then while wrk asks
    for challenges from `addresses` addresses (jepsen/scripts/challenge_flood.lua, never
    solving): honest joins per second in each, their ratio, and the challenges the node answered
    per second under the flood. Each honest visitor comes from an address of its own."""
    import os, subprocess
    room(a.base, a.token, a.room, {"proof_of_work": {"work": a.work, "cost": a.cost}})
    count = [0]

    def honest(seconds):
        stop, joined, tried = time.time() + seconds, 0, 0

        def one(_):
            count[0] += 1
            n = count[0]
            h = {"X-Forwarded-For": f"172.{16 + (n >> 16) % 16}.{(n >> 8) & 255}.{n & 255}"}
            altcha = solve(a.base, a.room, h)
            if altcha is None:
                return False
            s, _ = call(a.base, "POST", f"/v1/rooms/{a.room}/join", {"altcha": altcha},
                        headers=h)
            return s == 200

        with cf.ThreadPoolExecutor(a.workers) as ex:
            futures = set()
            while time.time() < stop:
                while len(futures) < a.workers * 2:
                    futures.add(ex.submit(one, None))
                done, futures = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
                for f in done:
                    tried += 1
                    joined += f.result()
            for f in futures:
                f.result()
        return joined / seconds, tried

    quiet, quiet_tried = honest(a.seconds)
    lua = os.path.join(os.path.dirname(os.path.abspath(__file__)), "challenge_flood.lua")
    wrk = subprocess.Popen(["wrk", "-t1", f"-c{a.connections}", f"-d{a.seconds + 2:.0f}s",
                            "-s", lua, f"{a.base}/v1/rooms/{a.room}/challenge", "--",
                            str(a.addresses)], stdout=subprocess.PIPE, text=True)
    # Let the flood reach its pace before the honest visitors start.
    time.sleep(1)
    flooded, flooded_tried = honest(a.seconds)
    out, _ = wrk.communicate()
    rate = next((float(l.split()[1]) for l in out.splitlines() if l.startswith("Requests/sec")), 0)
    refused = next((int(l.split()[-1]) for l in out.splitlines() if "Non-2xx" in l), 0)
    print(json.dumps({"work": a.work, "cost": a.cost, "honest_workers": a.workers,
                      "honest_joins_per_s_quiet": round(quiet, 1),
                      "honest_joins_per_s_flooded": round(flooded, 1),
                      "ratio": round(flooded / quiet, 2) if quiet else None,
                      "honest_tried": [quiet_tried, flooded_tried],
                      "flood_addresses": a.addresses, "flood_connections": a.connections,
                      "flood_answers_per_s": rate, "flood_non_2xx": refused}), flush=True)


def presolve(a):
    entry = {"proof_of_work": {"work": a.work, "cost": a.cost}} if a.work else {}
    room(a.base, a.token, a.room, entry)
    if not a.work:
        return
    with cf.ThreadPoolExecutor(a.workers) as pool:
        def solved(_):
            while True:  # a node that answers busy (older builds derive to issue) is asked again
                altcha = solve(a.base, a.room)
                if altcha is not None:
                    return json.dumps({"altcha": altcha})

        for body in pool.map(solved, range(a.count)):
            print(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("token")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=8)
    sub = ap.add_subparsers(dest="command")
    pre = sub.add_parser("presolve", help="make a room and write solved join bodies for wrk")
    pre.add_argument("--room", default="thr")
    pre.add_argument("--work", type=int, default=1, help="0: a room without proof-of-work")
    pre.add_argument("--cost", type=int, default=2000)
    pre.add_argument("--count", type=int, default=40000)
    fl = sub.add_parser("flood", help="honest joins per second without and with a flood of "
                        "requests for challenges")
    fl.add_argument("--room", default="flood")
    # The largest cost a rule may ask, one counter: solving is one derivation, as is checking.
    fl.add_argument("--work", type=int, default=2)
    fl.add_argument("--cost", type=int, default=20000)
    fl.add_argument("--addresses", type=int, default=1000)
    fl.add_argument("--connections", type=int, default=64)
    a = ap.parse_args()
    if a.command == "presolve":
        return presolve(a)
    if a.command == "flood":
        return flood(a)
    random.seed(1)
    for label, (entry, bot) in POLICIES.items():
        for addresses in (1, 100):
            if label in ("proof_of_work",) and addresses == 100:
                continue  # CPU, not addresses, bounds a solver
            print(json.dumps(places(a.base, a.token, a.seconds, label, entry, bot, addresses,
                                    a.workers)), flush=True)
    for label, (entry, bot) in POLICIES.items():
        print(json.dumps(lottery(a.base, a.token, label, entry, bot, 20)), flush=True)
    # What checking a proof costs the cluster: joins per minute with a challenge of the default
    # cost but a single counter (so the client's solving is one derivation), against none.
    only_throughput(a)


if __name__ == "__main__":
    main()
