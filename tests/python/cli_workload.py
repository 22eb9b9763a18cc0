# SPDX-License-Identifier: MIT
"""An unmodified program for `python -m ringprof` and `python -m cProfile` alike (the
tests compare their pstats keys and call counts): recursion, two methods of the same
co_name in two classes, comprehensions, a lambda, a generator, a closure, coroutines
run by asyncio. Prints its argv and __name__ as JSON."""
import asyncio
import json
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Tokenizer:
    def encode(self, text):
        return [ord(c) for c in text]


class Detokenizer:
    def encode(self, ids):  # the same co_name as Tokenizer.encode
        return "".join(chr(i) for i in ids)


def tokens(n):
    for i in range(n):
        yield i * 2


def outer(k):
    def inner(x):
        return x + k
    return sum(map(inner, range(5)))


async def step(i):
    await asyncio.sleep(0)
    return i


async def serve(n):
    return sum(await asyncio.gather(*(step(i) for i in range(n))))


def main():
    t, d = Tokenizer(), Detokenizer()
    for _ in range(3):
        d.encode(t.encode("hello"))
    fib(12)
    sorted(range(20), key=lambda x: -x)
    list(tokens(7))
    outer(3)
    asyncio.run(serve(4))
    print(json.dumps({"argv": sys.argv, "name": __name__}))


if __name__ == "__main__":
    main()
