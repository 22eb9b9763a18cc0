# A synthetic training-like trace: pids x tids, nested spans, steps, counters.
import random, sys
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
target = int(sys.argv[1])
cats = ["cpu_op", "kernel", "io", "comm", "python"]
out = sys.stdout
out.write('{"traceEvents":[\n')
first = True
n = 0
def ev(s):
    global first, n
    out.write(("" if first else ",\n") + s)
    first = False
    n += 1
tracks = [(1000, 1), (1000, 2), (1000, 3), (2000, 1), (2000, 2), (3000, 7)]
def children(pid, tid, lo, hi, depth):
    t = lo + random.randint(1, 2000)
    while depth < 4 and t + 500 < hi:
        room = hi - t - 1
        d = random.randint(100, max(101, room // 2))
        if d >= room: break
        ev('{"ph":"X","name":"op_%d_%d","cat":"%s","pid":%d,"tid":%d,"ts":%d.%03d,"dur":%d.%03d}' % (random.randint(0, 20), depth, random.choice(cats), pid, tid, t // 1000, t % 1000, d // 1000, d % 1000))
        if random.random() < 0.35: children(pid, tid, t, t + d, depth + 1)
        t += d + random.randint(1, 3000)
per = target // len(tracks)
for k, (pid, tid) in enumerate(tracks):
    t = 1_000_000_000
    step = 0
    start = n
    while n - start < per:
        d = random.randint(300_000, 900_000)
        phase = "eval" if step % 5 == 4 else "train"
        if k == 0:
            ev('{"ph":"X","name":"%s/step","cat":"step","pid":%d,"tid":%d,"ts":%d.%03d,"dur":%d.%03d}' % (phase, pid, tid, t // 1000, t % 1000, d // 1000, d % 1000))
        else:
            ev('{"ph":"X","name":"worker","cat":"python","pid":%d,"tid":%d,"ts":%d.%03d,"dur":%d.%03d}' % (pid, tid, t // 1000, t % 1000, d // 1000, d % 1000))
        children(pid, tid, t, t + d, 1)
        ev('{"ph":"C","name":"queue","pid":%d,"tid":%d,"ts":%d.%03d,"args":{"depth":%d}}' % (pid, tid, t // 1000, t % 1000, random.randint(0, 64)))
        t += d + random.randint(1000, 500_000)
        step += 1
out.write('\n]}\n')
