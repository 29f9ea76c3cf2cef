# A Python program's allocations: dicts and lists built, sorted and dropped, with
# threads. bento-malloc's benchmark runs it under each allocator.
import threading

d = {i: str(i) * 3 for i in range(600000)}
items = sorted(d.items(), key=lambda kv: kv[1], reverse=True)
words = [w * 2 for _, w in items[:200000]]
words.sort()
del d, items
out = []


def work(k):
    local = [str(j) * k for j in range(100000)]
    table = {s: len(s) for s in local}
    out.append(sum(table.values()))


ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(len(words), sorted(out)[0])
