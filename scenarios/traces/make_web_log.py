#!/usr/bin/env python3
"""Writes web.log: a synthetic three-hour web-server log in Common Log
Format, the trace of scenarios s9 and s9-rate. Deterministic (seeded).

A site of 40 HTML pages (Zipf popularity, exponent 1) embedding 0-4 of 60
images (a logo on every page, others shared between pages); page sizes
log-normal around 6 KB, images around 8 KB. A visit every 5 s on average
(Poisson) from one of 400 hosts: the page, then its images within the
same or next second. A host that fetched an image in the last 10 minutes
gets 304 Not Modified for it. About 2% of requests are 404s or POSTs,
which the simulator skips.

    python3 scenarios/traces/make_web_log.py > scenarios/traces/web.log
"""
import math
import random
import time

rng = random.Random(20260101)
PAGES, IMAGES, HOSTS = 40, 60, 400
page_size = [int(min(40000, max(800, rng.lognormvariate(math.log(6000), 0.7)))) for _ in range(PAGES)]
image_size = [int(min(60000, max(300, rng.lognormvariate(math.log(8000), 0.9)))) for _ in range(IMAGES)]
embeds = [[0] + rng.sample(range(1, IMAGES), rng.randint(0, 3)) for _ in range(PAGES)]
weights = [1.0 / (i + 1) for i in range(PAGES)]
hosts = ["10.%d.%d.%d" % (rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254)) for _ in range(HOSTS)]
seen = {}  # (host, image) -> time fetched

start = 1_000_000_000  # 2001-09-09
t = 0.0
lines = []


def line(host, at, method, path, status, size):
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(start + int(at)))
    lines.append('%s - - [%s] "%s %s HTTP/1.0" %d %s' % (host, stamp, method, path, status, size))


while True:
    t += rng.expovariate(1 / 5.0)
    if t >= 3 * 3600:
        break
    host = rng.choice(hosts)
    page = rng.choices(range(PAGES), weights)[0]
    if rng.random() < 0.02:
        if rng.random() < 0.5:
            line(host, t, "GET", "/missing%d.html" % rng.randint(0, 99), 404, 210)
        else:
            line(host, t, "POST", "/cgi-bin/form", 200, 512)
        continue
    line(host, t, "GET", "/page%d.html" % page, 200, page_size[page])
    for img in embeds[page]:
        at = t + rng.uniform(0.05, 0.9)
        if at - seen.get((host, img), -1e9) < 600:
            line(host, at, "GET", "/img/i%d.gif" % img, 304, "-")
        else:
            seen[(host, img)] = at
            line(host, at, "GET", "/img/i%d.gif" % img, 200, image_size[img])

print("\n".join(lines))
