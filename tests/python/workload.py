# SPDX-License-Identifier: MIT
"""A deterministic workload for trace_calls() against cProfile: recursion, method
calls, comprehensions, a generator and a lambda."""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Vec:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y)

    def norm2(self):
        return self.x * self.x + self.y * self.y


def squares(n):
    for i in range(n):
        yield i * i


def comprehend(n):
    evens = [i for i in range(n) if i % 2 == 0]
    table = {i: [j * i for j in range(5)] for i in evens}
    return sum(sum(v) for v in table.values())


def vectors(n):
    acc = Vec(0, 0)
    for i in range(n):
        acc = acc.add(Vec(i, -i))
    return acc.norm2()


def run(scale=1):
    total = 0
    for _ in range(scale):
        total += fib(18)
        total += vectors(2000)
        total += comprehend(3000)
        total += sum(squares(2000))
        total += sorted(range(500), key=lambda v: -v)[0]
    return total
