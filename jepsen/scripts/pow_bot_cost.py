#!/usr/bin/env python3
"""What a place costs a bot in a room that asks a proof-of-work: fetches challenges from a
running node, solves them natively (OpenSSL's PBKDF2 through hashlib, as a bot would), joins
with each solution, and prints the CPU-seconds spent per place taken.

    python3 jepsen/scripts/pow_bot_cost.py http://127.0.0.1:8080 sale 20
"""
import base64, hashlib, json, resource, sys, time, urllib.request


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    base, room, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    spent, places, derivations = 0.0, 0, 0
    for _ in range(n):
        with urllib.request.urlopen(f"{base}/v1/rooms/{room}/challenge") as r:
            c = json.load(r)
        p = c["parameters"]
        nonce, salt = bytes.fromhex(p["nonce"]), bytes.fromhex(p["salt"])
        prefix = p["keyPrefix"]
        t = cpu()
        for counter in range(p["data"]["start"], p["data"]["end"]):
            derivations += 1
            key = hashlib.pbkdf2_hmac("sha256", nonce + counter.to_bytes(4, "big"), salt,
                                      p["cost"], p["keyLength"])
            if key.hex().startswith(prefix):
                break
        spent += cpu() - t
        payload = base64.b64encode(json.dumps({
            "challenge": c, "solution": {"counter": counter, "derivedKey": key.hex()}}).encode())
        req = urllib.request.Request(f"{base}/v1/rooms/{room}/join", method="POST",
                                     data=json.dumps({"altcha": payload.decode()}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            places += r.status == 200
    print(json.dumps({"places": places, "cpu_seconds": round(spent, 2),
                      "cpu_seconds_per_place": round(spent / max(places, 1), 3),
                      "derivations_per_place": derivations / max(places, 1),
                      "work": p["data"]["work"], "cost": p["cost"]}))


if __name__ == "__main__":
    main()
