"""Random inputs for the *_random.jsonl fixtures (seeded, reproducible).

Writes q.txt n.txt u.txt s.txt f.txt r.txt in the current directory; see
README.md for how they go through the Go generator.
"""
import json
import random

random.seed(42)


def rs(alpha, n):
    return "".join(random.choice(alpha) for _ in range(random.randint(0, n)))


def write(name, items, as_json=False):
    with open(name, "w") as f:
        for x in sorted(items):
            f.write((json.dumps(x) if as_json else x) + "\n")


qs = set()
for _ in range(4000):
    num = random.choice(["", "+", "-"]) + rs("0123456789", 22)
    num += random.choice(["", ".", "." + rs("0123456789", 12)])
    suf = random.choice(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi",
                         "Ti", "Pi", "Ei", "e", "E", "e-", "e+", "K", "i", "x"])
    if suf in ("e", "E", "e-", "e+"):
        # Small exponents only: Go hangs on some huge ones (see quantity.rs).
        suf += rs("0123456789", 3)
    qs.add(num + suf)
write("q.txt", qs)

ns = set()
for _ in range(4000):
    if random.random() < 0.4:
        s = ".".join(rs("0123456789", 3) for _ in range(random.randint(2, 5)))
    else:
        s = ":".join(rs("0123456789abcdefABCDEF", 5) for _ in range(random.randint(1, 9)))
        if random.random() < 0.2:
            s += ":" + ".".join(rs("0123456789", 3) for _ in range(4))
    if random.random() < 0.4:
        s += "/" + rs("0123456789", 3)
    if random.random() < 0.05:
        s += "%" + rs("abc", 3)
    ns.add(s)
write("n.txt", ns)

parts = ["http", "https", "ftp", "HTTP", "", "mailto", ":", "//", "/", "?", "#", "@", "user",
         "pass", "[::1]", "[fe80::1%25en0]", "host", "example.com", ":80", ":x", "%20", "%zz",
         "%41", "a b", "&", "=", ";", "+", ".", "..", "~", "!", "*", "'", "(", ")", "[", "]", "é"]
write("u.txt", {"".join(random.choice(parts) for _ in range(random.randint(0, 8)))
                for _ in range(4000)})
write("s.txt", {rs("0123456789.-+vVa0", 14) for _ in range(3000)})
write("f.txt", {rs("abcXYZ0129-._/:T+Z=t", random.choice([5, 12, 70, 260])) for _ in range(3000)},
      as_json=True)
write("r.txt", {rs("ab()[]{}|*+?.^$\\-:,0123dDwWsSpPxQEbBAz<>iU", 12) for _ in range(3000)},
      as_json=True)
